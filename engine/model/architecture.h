// The architecture registry: one small file per Hugging Face model family maps its config.json
// onto a DecoderDesc and its tensor names onto the engine's logical weights.
#pragma once

#include <string>
#include <vector>

#include "engine/model/decoder_desc.h"
#include "engine/model/model_config.h"

namespace lmx {

// Hugging Face tensor names of one family. In per-layer names "{}" stands for the layer index.
// Lists are concatenated along output rows (q, k, v; gate, up); a single entry means the
// checkpoint stores them fused (GPT-2's c_attn). Empty names mean "not present".
struct TensorNames {
  std::string embed;
  std::string position_embed;  // learned absolute positions only
  std::string final_norm_weight, final_norm_bias;
  std::string lm_head;

  std::string attn_norm_weight, attn_norm_bias;
  std::vector<std::string> qkv_weight, qkv_bias;
  std::string o_weight, o_bias;
  std::string mlp_norm_weight, mlp_norm_bias;
  std::vector<std::string> up_weight, up_bias;
  std::string down_weight, down_bias;

  bool linear_weights_transposed = false;  // GPT-2's Conv1D stores weights as [in, out]
  std::string optional_prefix;             // tried with and without it ("transformer.")
};

struct Architecture {
  const char* hf_name;  // "LlamaForCausalLM"
  // Kernel injection: the family has a fused-kernel policy on CUDA. Families without one run the
  // generic path (auto tensor parallelism); see docs/architecture.md.
  bool fused_policy;
  DecoderDesc (*describe)(const ModelConfig& config);
  TensorNames (*tensor_names)(const DecoderDesc& desc);
};

// Throws lmx::Error naming the supported architectures when `hf_name` is not one of them.
const Architecture& find_architecture(const std::string& hf_name);
std::vector<std::string> supported_architectures();

}  // namespace lmx
