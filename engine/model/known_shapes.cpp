#include "engine/model/known_shapes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "engine/model/architecture.h"

namespace lmx {
namespace {

struct Shape {
  const char* name;
  const char* config;  // config.json of the published model, math-relevant fields
};

constexpr Shape kShapes[] = {
    {"llama-2-7b", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
      "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0})"},
    {"llama-2-13b", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 5120,
      "intermediate_size": 13824, "num_hidden_layers": 40, "num_attention_heads": 40,
      "num_key_value_heads": 40, "vocab_size": 32000, "max_position_embeddings": 4096,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0})"},
    {"llama-2-70b", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8192,
      "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64,
      "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 4096,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0})"},
    {"llama-3-8b", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
      "rms_norm_eps": 1e-5, "rope_theta": 500000.0})"},
    {"mistral-7b", R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 32768,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "sliding_window": 4096})"},
    {"qwen2-7b", R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584,
      "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
      "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768,
      "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "use_sliding_window": false})"},
    {"gpt-j-6b", R"({"architectures": ["GPTJForCausalLM"], "n_embd": 4096, "n_layer": 28,
      "n_head": 16, "rotary_dim": 64, "vocab_size": 50400, "n_positions": 2048,
      "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
      "tie_word_embeddings": false})"},
    {"pythia-6.9b", R"({"architectures": ["GPTNeoXForCausalLM"], "hidden_size": 4096,
      "intermediate_size": 16384, "num_hidden_layers": 32, "num_attention_heads": 32,
      "rotary_pct": 0.25, "rotary_emb_base": 10000, "vocab_size": 50432,
      "max_position_embeddings": 2048, "use_parallel_residual": true, "layer_norm_eps": 1e-5,
      "hidden_act": "gelu", "tie_word_embeddings": false})"},
    {"gpt-neo-2.7b", R"({"architectures": ["GPTNeoForCausalLM"], "hidden_size": 2560,
      "num_layers": 32, "num_heads": 20, "attention_types": [[["global", "local"], 16]],
      "window_size": 256, "vocab_size": 50257, "max_position_embeddings": 2048,
      "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5})"},
    {"opt-6.7b", R"({"architectures": ["OPTForCausalLM"], "hidden_size": 4096, "ffn_dim": 16384,
      "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 50272,
      "max_position_embeddings": 2048, "do_layer_norm_before": true,
      "word_embed_proj_dim": 4096, "activation_function": "relu"})"},
    {"bloom-7b1", R"({"architectures": ["BloomForCausalLM"], "hidden_size": 4096, "n_layer": 30,
      "n_head": 32, "vocab_size": 250880, "layer_norm_epsilon": 1e-5, "seq_length": 2048})"},
};

}  // namespace

nlohmann::json known_shape_config(const std::string& name) {
  for (const Shape& s : kShapes)
    if (name == s.name) return nlohmann::json::parse(s.config);
  throw_error("unknown shape '{}'; known shapes: {}", name, fmt::join(known_shape_names(), ", "));
}

DecoderDesc known_shape(const std::string& name) {
  const ModelConfig config =
      ModelConfig::from_json(known_shape_config(name), nlohmann::json::object(), name);
  return find_architecture(config.architecture()).describe(config);
}

std::vector<std::string> known_shape_names() {
  std::vector<std::string> names;
  for (const Shape& s : kShapes) names.emplace_back(s.name);
  return names;
}

}  // namespace lmx
