#include "engine/model/known_shapes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/error.h"

namespace lmx {
namespace {

struct Shape {
  const char* name;
  const char* architecture;
  int hidden, inter, layers, heads, kv_heads, vocab, max_positions;
  float theta;
  bool qkv_bias;
  int window;
};

constexpr Shape kShapes[] = {
    {"llama-2-7b", "LlamaForCausalLM", 4096, 11008, 32, 32, 32, 32000, 4096, 10000.0f, false, 0},
    {"llama-2-13b", "LlamaForCausalLM", 5120, 13824, 40, 40, 40, 32000, 4096, 10000.0f, false, 0},
    {"llama-3-8b", "LlamaForCausalLM", 4096, 14336, 32, 32, 8, 128256, 8192, 500000.0f, false, 0},
    {"mistral-7b", "MistralForCausalLM", 4096, 14336, 32, 32, 8, 32000, 32768, 10000.0f, false, 4096},
    {"qwen2-7b", "Qwen2ForCausalLM", 3584, 18944, 28, 28, 4, 152064, 32768, 1000000.0f, true, 0},
};

}  // namespace

DecoderDesc known_shape(const std::string& name) {
  if (name == "gpt-j-6b")
    throw_error("gpt-j-6b needs a parallel residual and interleaved rotary, which LMX does not "
                "support yet; known shapes: {}", fmt::join(known_shape_names(), ", "));
  for (const Shape& s : kShapes) {
    if (name != s.name) continue;
    DecoderDesc d;
    d.architecture = s.architecture;
    d.hidden_size = s.hidden;
    d.intermediate_size = s.inter;
    d.num_layers = s.layers;
    d.num_heads = s.heads;
    d.num_kv_heads = s.kv_heads;
    d.head_dim = s.hidden / s.heads;
    d.vocab_size = s.vocab;
    d.max_position_embeddings = s.max_positions;
    d.norm = NormKind::RmsNorm;
    d.norm_eps = 1e-5f;
    d.rope.theta = s.theta;
    d.rope.rotary_dim = d.head_dim;
    d.qkv_bias = s.qkv_bias;
    d.sliding_window.assign(size_t(s.layers), s.window);
    return d;
  }
  throw_error("unknown shape '{}'; known shapes: {}", name, fmt::join(known_shape_names(), ", "));
}

std::vector<std::string> known_shape_names() {
  std::vector<std::string> names;
  for (const Shape& s : kShapes) names.emplace_back(s.name);
  return names;
}

}  // namespace lmx
