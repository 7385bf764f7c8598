// Qwen2ForCausalLM: the Llama layout with q/k/v biases (o_proj has none) and sliding windows on
// layers from `max_window_layers` on when `use_sliding_window` is set.
#include "engine/model/architectures/common.h"

namespace lmx {
namespace {

DecoderDesc describe(const ModelConfig& config) {
  DecoderDesc d = arch::describe_llama_like(config, /*tie_default=*/false);
  d.qkv_bias = true;
  const bool sliding = config.get_bool("use_sliding_window").value_or(false);
  const int window = sliding ? config.get_int({"sliding_window"}).value_or(0) : 0;
  const int first_sliding = config.get_int({"max_window_layers"}).value_or(d.num_layers);
  d.sliding_window = arch::read_sliding_windows(
      config, d.num_layers, [&](int layer) { return layer >= first_sliding ? window : 0; });
  arch::finish_desc(config, d);
  return d;
}

}  // namespace

extern const Architecture kQwen2Architecture{"Qwen2ForCausalLM", /*fused_policy=*/true, describe,
                                             arch::llama_style_names};

}  // namespace lmx
