// Config readers shared by the architecture families (engine/model/architectures/*.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/model/architecture.h"

namespace lmx::arch {

// Rotary settings in both spellings: legacy (`rope_theta`, `rope_scaling`) and transformers 5
// (`rope_parameters`), with `partial_rotary_factor`. Unsupported rope types are errors.
RopeDesc read_rope(const ModelConfig& config, int head_dim);

Activation parse_activation(const ModelConfig& config, const char* key, const std::string& fallback);

// Per-layer sliding windows from transformers 5's `layer_types` when present, otherwise from the
// family's legacy rule `fallback(layer) -> window` (0 = full attention).
std::vector<int> read_sliding_windows(const ModelConfig& config, int num_layers,
                                      const std::function<int(int)>& fallback);

// The Llama-style decoder that Llama, Mistral and Qwen2 share: RMSNorm, rotary, gated SiLU MLP.
// Families adjust biases and sliding windows on the result.
DecoderDesc describe_llama_like(const ModelConfig& config, bool tie_default);

// Hugging Face names of the Llama-style layout ("model.layers.{}.self_attn.q_proj.weight", ...).
TensorNames llama_style_names(const DecoderDesc& desc);

// Token ids and checks common to every family; call last in describe().
void finish_desc(const ModelConfig& config, DecoderDesc& desc);

}  // namespace lmx::arch
