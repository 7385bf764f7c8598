// GPT2LMHeadModel: LayerNorm, learned absolute positions, fused c_attn, plain GELU MLP, biases
// everywhere, Conv1D weights stored transposed ([in, out]), head tied to the embedding.
#include "engine/core/error.h"
#include "engine/model/architectures/common.h"

namespace lmx {
namespace {

DecoderDesc describe(const ModelConfig& config) {
  if (config.get_bool("scale_attn_by_inverse_layer_idx").value_or(false))
    throw_error("{}: scale_attn_by_inverse_layer_idx=true is not supported", config.source());
  DecoderDesc d = arch::describe_layer_norm_decoder(config);
  arch::read_mha_sizes(config, d, {"n_embd", "hidden_size"}, {"n_layer", "num_hidden_layers"},
                       {"n_head", "num_attention_heads"});
  d.intermediate_size = arch::mlp_size_or_4x_hidden(config, d, {"n_inner"});
  d.max_position_embeddings = config.require_int({"n_positions", "max_position_embeddings"});
  d.norm_eps = arch::read_norm_eps(config, "layer_norm_epsilon", 1e-5);
  d.positions = PositionKind::LearnedAbsolute;
  d.activation = arch::parse_activation(config, "activation_function", "gelu_new");
  d.qkv_bias = d.o_bias = d.mlp_bias = true;
  d.tie_word_embeddings = config.get_bool("tie_word_embeddings").value_or(true);
  arch::finish_desc(config, d);
  return d;
}

TensorNames names(const DecoderDesc&) {
  TensorNames n;
  n.optional_prefix = "transformer.";  // original OpenAI checkpoints omit it
  n.embed = "transformer.wte.weight";
  n.position_embed = "transformer.wpe.weight";
  arch::norm_names(n.final_norm_weight, n.final_norm_bias, "transformer.ln_f");
  n.lm_head = "lm_head.weight";
  const std::string layer = "transformer.h.{}.";
  arch::norm_names(n.attn_norm_weight, n.attn_norm_bias, layer + "ln_1");
  arch::linear_names(n.qkv_weight, n.qkv_bias, layer + "attn.c_attn", true);
  arch::linear_names(n.o_weight, n.o_bias, layer + "attn.c_proj", true);
  arch::norm_names(n.mlp_norm_weight, n.mlp_norm_bias, layer + "ln_2");
  arch::linear_names(n.up_weight, n.up_bias, layer + "mlp.c_fc", true);
  arch::linear_names(n.down_weight, n.down_bias, layer + "mlp.c_proj", true);
  n.linear_weights_transposed = true;
  return n;
}

}  // namespace

extern const Architecture kGpt2Architecture{"GPT2LMHeadModel", /*fused_policy=*/false, describe,
                                            names};

}  // namespace lmx
