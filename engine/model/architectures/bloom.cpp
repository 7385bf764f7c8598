// BloomForCausalLM: ALiBi instead of positions, a LayerNorm right after the word embeddings,
// q/k/v fused per head ([heads, 3, head_dim] rows, reordered at load), a plain GELU (tanh) MLP,
// biases everywhere, head tied to the embedding. apply_residual_connection_post_layernorm takes
// each block's residual from its norm's output.
#include "engine/core/error.h"
#include "engine/model/architectures/common.h"

namespace lmx {
namespace {

DecoderDesc describe(const ModelConfig& config) {
  // pretraining_tp > 1 with slow_but_exact splits the output projections into partial sums that
  // drop their biases in transformers: a different model, refused.
  if (config.get_bool("slow_but_exact").value_or(false) && config.get_int({"pretraining_tp"}).value_or(1) > 1)
    throw_error("{}: 'slow_but_exact' = true with 'pretraining_tp' = {} is not supported",
                config.source(), *config.get_int({"pretraining_tp"}));
  DecoderDesc d = arch::describe_layer_norm_decoder(config);
  d.vocab_size = config.require_int({"vocab_size"});
  d.hidden_size = config.require_int({"hidden_size", "n_embed"});
  d.num_layers = config.require_int({"n_layer", "num_hidden_layers"});
  d.num_heads = d.num_kv_heads = config.require_int({"n_head", "num_attention_heads"});
  if (d.num_heads <= 0 || d.hidden_size % d.num_heads != 0)
    throw_error("{}: hidden_size {} is not a multiple of n_head {}", config.source(), d.hidden_size,
                d.num_heads);
  d.head_dim = d.hidden_size / d.num_heads;
  d.intermediate_size = 4 * d.hidden_size;
  // ALiBi has no position table; the context limit is the serving configuration's. Bloom's
  // configs name their training length `seq_length` when they name one.
  d.max_position_embeddings = config.get_int({"max_position_embeddings", "seq_length"}).value_or(2048);
  d.norm_eps = float(config.get_double({"layer_norm_epsilon"}).value_or(1e-5));
  d.positions = PositionKind::Alibi;
  d.embedding_norm = true;
  d.residual_from_norm = config.get_bool("apply_residual_connection_post_layernorm").value_or(false);
  d.activation = Activation::GeluTanh;  // bloom_gelu_forward: the tanh approximation
  d.qkv_bias = d.o_bias = d.mlp_bias = true;
  d.tie_word_embeddings = config.get_bool("tie_word_embeddings").value_or(true);
  arch::finish_desc(config, d);
  return d;
}

TensorNames names(const DecoderDesc&) {
  TensorNames n;
  n.optional_prefix = "transformer.";  // bigscience checkpoints store "h.0...."
  n.embed = "transformer.word_embeddings.weight";
  n.embed_norm_weight = "transformer.word_embeddings_layernorm.weight";
  n.embed_norm_bias = "transformer.word_embeddings_layernorm.bias";
  n.final_norm_weight = "transformer.ln_f.weight";
  n.final_norm_bias = "transformer.ln_f.bias";
  n.lm_head = "lm_head.weight";
  const std::string layer = "transformer.h.{}.";
  n.attn_norm_weight = layer + "input_layernorm.weight";
  n.attn_norm_bias = layer + "input_layernorm.bias";
  n.qkv_weight = {layer + "self_attention.query_key_value.weight"};
  n.qkv_bias = {layer + "self_attention.query_key_value.bias"};
  n.qkv_layout = QkvLayout::PerHead;
  n.o_weight = layer + "self_attention.dense.weight";
  n.o_bias = layer + "self_attention.dense.bias";
  n.mlp_norm_weight = layer + "post_attention_layernorm.weight";
  n.mlp_norm_bias = layer + "post_attention_layernorm.bias";
  n.up_weight = {layer + "mlp.dense_h_to_4h.weight"};
  n.up_bias = {layer + "mlp.dense_h_to_4h.bias"};
  n.down_weight = layer + "mlp.dense_4h_to_h.weight";
  n.down_bias = layer + "mlp.dense_4h_to_h.bias";
  return n;
}

}  // namespace

extern const Architecture kBloomArchitecture{"BloomForCausalLM", /*fused_policy=*/true, describe,
                                             names};

}  // namespace lmx
