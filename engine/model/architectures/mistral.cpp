// MistralForCausalLM: the Llama layout without biases, with a sliding attention window.
#include "engine/model/architectures/common.h"

namespace lmx {
namespace {

DecoderDesc describe(const ModelConfig& config) {
  DecoderDesc d = arch::describe_llama_like(config, /*tie_default=*/false);
  const int window = config.get_int({"sliding_window"}).value_or(0);
  d.sliding_window = arch::read_sliding_windows(config, d.num_layers, [&](int) { return window; });
  arch::finish_desc(config, d);
  return d;
}

}  // namespace

extern const Architecture kMistralArchitecture{"MistralForCausalLM", /*fused_policy=*/true, describe,
                                               arch::llama_style_names};

}  // namespace lmx
