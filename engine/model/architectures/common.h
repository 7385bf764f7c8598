// Config readers shared by the architecture families (engine/model/architectures/*.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/model/architecture.h"

namespace lmx::arch {

// Rotary settings in both spellings: legacy (top-level keys, `rope_scaling`) and transformers 5
// (`rope_parameters`, which wins). Unsupported rope types are errors. Families name their own
// legacy top-level keys (GPT-NeoX: `rotary_emb_base`, `rotary_pct`, default fraction 0.25).
struct RopeLegacyKeys {
  const char* theta = "rope_theta";                // the base
  const char* partial = "partial_rotary_factor";  // the rotary fraction of head_dim
  double partial_default = 1.0;
};
RopeDesc read_rope(const ModelConfig& config, int head_dim, RopeLegacyKeys legacy = {});

// A norm's epsilon from `key` (default when absent): a positive finite number, else an error
// naming the key and the value (a negative or zero epsilon makes the norm undefined).
float read_norm_eps(const ModelConfig& config, const char* key, double fallback);

// The layer count from the first of `keys` present: positive, else an error naming it.
int read_layer_count(const ModelConfig& config, std::initializer_list<const char*> keys);

// Refuses a config value that changes the math in a way the engine does not implement:
// `key` present with a value other than `supported` (absent is fine). The error names both.
void require_value(const ModelConfig& config, const char* key, const nlohmann::json& supported);

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

// GPT-2-style LayerNorm decoders (GPT-2, GPT-J, GPT-Neo, GPT-NeoX, OPT, Bloom) start from this:
// LayerNorm, plain MLP, full attention on every layer; sizes are read by the caller.
DecoderDesc describe_layer_norm_decoder(const ModelConfig& config);

// The MLP width from the first present key of `keys`, else 4 x the hidden size (GPT-2's
// default; no key: always that). lmx::Error when 4 x hidden does not fit an int.
int mlp_size_or_4x_hidden(const ModelConfig& config, const DecoderDesc& d,
                          std::initializer_list<const char*> keys);

// vocab_size, hidden size, layers and heads (as many KV heads: multi-head attention), head_dim =
// hidden / heads, read from the first present key of each list (a family's aliases).
void read_mha_sizes(const ModelConfig& config, DecoderDesc& d,
                    std::initializer_list<const char*> hidden_keys,
                    std::initializer_list<const char*> layer_keys,
                    std::initializer_list<const char*> head_keys);

// Tensor names of a module: "<module>.weight" and "<module>.bias" (empty bias without one).
void norm_names(std::string& weight, std::string& bias, const std::string& module);
void linear_names(std::string& weight, std::string& bias, const std::string& module, bool has_bias);
void linear_names(std::vector<std::string>& weight, std::vector<std::string>& bias,
                  const std::string& module, bool has_bias);

// Token ids and checks common to every family; call last in describe(). Fills embed_dim from
// hidden_size when the family left it 0.
void finish_desc(const ModelConfig& config, DecoderDesc& desc);

}  // namespace lmx::arch
