// The architecture registry: one small file per Hugging Face model family maps its config.json
// onto a DecoderDesc and its tensor names onto the engine's logical weights.
#pragma once

#include <string>
#include <vector>

#include "engine/model/decoder_desc.h"
#include "engine/model/model_config.h"

namespace lmx {

// How a checkpoint stores the fused q/k/v projection when it names one tensor for it.
enum class QkvLayout {
  Concatenated,  // all q rows, then all k rows, then all v rows (GPT-2's c_attn)
  PerHead,       // [heads, 3, head_dim]: q, k, v rows of head 0, then of head 1, ... (NeoX, Bloom)
};

// Hugging Face tensor names of one family. In per-layer names "{}" stands for the layer index.
// Lists are concatenated along output rows (q, k, v; gate, up); a single entry means the
// checkpoint stores them fused (GPT-2's c_attn). Empty names mean "not present".
struct TensorNames {
  std::string embed;
  std::string position_embed;  // learned absolute positions only
  std::string embed_norm_weight, embed_norm_bias;  // DecoderDesc::embedding_norm
  std::string project_in, project_out;             // DecoderDesc::projects_embeddings()
  std::string final_norm_weight, final_norm_bias;
  std::string lm_head, lm_head_bias;

  std::string attn_norm_weight, attn_norm_bias;
  std::vector<std::string> qkv_weight, qkv_bias;
  QkvLayout qkv_layout = QkvLayout::Concatenated;
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

// Which implementation of the layer program a model runs, and why (logged at load, reported by
// the engine's stats / health and by `lmx config`): "cpu_reference", "kernel_injection" (the
// family has a fused policy, CUDA) or "generic" (no policy: the same steps unfused).
struct ExecutionPath {
  std::string name, reason;
};
ExecutionPath execution_path(const Architecture& architecture, bool cpu_device);

// Throws lmx::Error naming the supported architectures when `hf_name` is not one of them.
const Architecture& find_architecture(const std::string& hf_name);
std::vector<std::string> supported_architectures();

}  // namespace lmx
