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
  // transformers takes the legacy n_embed over hidden_size when a config has both.
  arch::read_mha_sizes(config, d, {"n_embed", "hidden_size"}, {"n_layer", "num_hidden_layers"},
                       {"n_head", "num_attention_heads"});
  d.intermediate_size = arch::mlp_size_or_4x_hidden(config, d, {});
  // ALiBi has no position table; the context limit is the serving configuration's. Bloom's
  // configs name their training length `seq_length` when they name one.
  d.max_position_embeddings = config.get_int({"max_position_embeddings", "seq_length"}).value_or(2048);
  d.norm_eps = arch::read_norm_eps(config, "layer_norm_epsilon", 1e-5);
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
  arch::norm_names(n.embed_norm_weight, n.embed_norm_bias, "transformer.word_embeddings_layernorm");
  arch::norm_names(n.final_norm_weight, n.final_norm_bias, "transformer.ln_f");
  n.lm_head = "lm_head.weight";
  const std::string layer = "transformer.h.{}.";
  arch::norm_names(n.attn_norm_weight, n.attn_norm_bias, layer + "input_layernorm");
  arch::linear_names(n.qkv_weight, n.qkv_bias, layer + "self_attention.query_key_value", true);
  n.qkv_layout = QkvLayout::PerHead;
  arch::linear_names(n.o_weight, n.o_bias, layer + "self_attention.dense", true);
  arch::norm_names(n.mlp_norm_weight, n.mlp_norm_bias, layer + "post_attention_layernorm");
  arch::linear_names(n.up_weight, n.up_bias, layer + "mlp.dense_h_to_4h", true);
  arch::linear_names(n.down_weight, n.down_bias, layer + "mlp.dense_4h_to_h", true);
  return n;
}

}  // namespace

extern const Architecture kBloomArchitecture{"BloomForCausalLM", /*fused_policy=*/true, describe,
                                             names};

}  // namespace lmx
