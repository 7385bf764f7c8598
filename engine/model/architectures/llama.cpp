// LlamaForCausalLM: RMSNorm, rotary (incl. llama3 scaling), GQA, optional attention/MLP biases.
#include "engine/model/architectures/common.h"

namespace lmx {
namespace {

DecoderDesc describe(const ModelConfig& config) {
  DecoderDesc d = arch::describe_llama_like(config, /*tie_default=*/false);
  d.qkv_bias = d.o_bias = config.get_bool("attention_bias").value_or(false);
  d.mlp_bias = config.get_bool("mlp_bias").value_or(false);
  arch::finish_desc(config, d);
  return d;
}

}  // namespace

extern const Architecture kLlamaArchitecture{"LlamaForCausalLM", /*fused_policy=*/true, describe,
                                             arch::llama_style_names};

}  // namespace lmx
