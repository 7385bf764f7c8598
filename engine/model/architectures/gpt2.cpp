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
  d.vocab_size = config.require_int({"vocab_size"});
  d.hidden_size = config.require_int({"n_embd", "hidden_size"});
  d.num_layers = config.require_int({"n_layer", "num_hidden_layers"});
  d.num_heads = config.require_int({"n_head", "num_attention_heads"});
  d.num_kv_heads = d.num_heads;
  if (d.num_heads <= 0 || d.hidden_size % d.num_heads != 0)
    throw_error("{}: n_embd {} is not a multiple of n_head {}", config.source(), d.hidden_size,
                d.num_heads);
  d.head_dim = d.hidden_size / d.num_heads;
  d.intermediate_size = config.get_int({"n_inner"}).value_or(4 * d.hidden_size);
  d.max_position_embeddings = config.require_int({"n_positions", "max_position_embeddings"});
  d.norm_eps = float(config.get_double({"layer_norm_epsilon"}).value_or(1e-5));
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
  n.final_norm_weight = "transformer.ln_f.weight";
  n.final_norm_bias = "transformer.ln_f.bias";
  n.lm_head = "lm_head.weight";
  const std::string layer = "transformer.h.{}.";
  n.attn_norm_weight = layer + "ln_1.weight";
  n.attn_norm_bias = layer + "ln_1.bias";
  n.qkv_weight = {layer + "attn.c_attn.weight"};
  n.qkv_bias = {layer + "attn.c_attn.bias"};
  n.o_weight = layer + "attn.c_proj.weight";
  n.o_bias = layer + "attn.c_proj.bias";
  n.mlp_norm_weight = layer + "ln_2.weight";
  n.mlp_norm_bias = layer + "ln_2.bias";
  n.up_weight = {layer + "mlp.c_fc.weight"};
  n.up_bias = {layer + "mlp.c_fc.bias"};
  n.down_weight = layer + "mlp.c_proj.weight";
  n.down_bias = layer + "mlp.c_proj.bias";
  n.linear_weights_transposed = true;
  return n;
}

}  // namespace

extern const Architecture kGpt2Architecture{"GPT2LMHeadModel", /*fused_policy=*/false, describe,
                                            names};

}  // namespace lmx
