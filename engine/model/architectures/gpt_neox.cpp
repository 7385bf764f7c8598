// GPTNeoXForCausalLM (Pythia, GPT-NeoX-20B): LayerNorm, rotary (rotate half) on the first
// rotary_pct of each head, q/k/v fused per head ([heads, 3, head_dim] rows, reordered at load),
// a parallel residual with two norms (use_parallel_residual) or a sequential one, separate
// embedding and output matrices.
#include "engine/core/error.h"
#include "engine/model/architectures/common.h"

namespace lmx {
namespace {

DecoderDesc describe(const ModelConfig& config) {
  DecoderDesc d = arch::describe_layer_norm_decoder(config);
  d.vocab_size = config.require_int({"vocab_size"});
  d.hidden_size = config.require_int({"hidden_size"});
  d.num_layers = config.require_int({"num_hidden_layers"});
  d.num_heads = d.num_kv_heads = config.require_int({"num_attention_heads"});
  if (d.num_heads <= 0 || d.hidden_size % d.num_heads != 0)
    throw_error("{}: hidden_size {} is not a multiple of num_attention_heads {}", config.source(),
                d.hidden_size, d.num_heads);
  d.head_dim = d.hidden_size / d.num_heads;
  d.intermediate_size = config.require_int({"intermediate_size"});
  d.max_position_embeddings = config.get_int({"max_position_embeddings"}).value_or(2048);
  d.norm_eps = float(config.get_double({"layer_norm_eps"}).value_or(1e-5));
  d.parallel_residual = config.get_bool("use_parallel_residual").value_or(true);
  d.positions = PositionKind::Rotary;
  // transformers 5 reads rope_parameters, else these legacy keys (never a top-level rope_theta
  // or partial_rotary_factor), and rotates a quarter of each head by default.
  d.rope = arch::read_rope(config, d.head_dim,
                           {.theta = "rotary_emb_base", .partial = "rotary_pct", .partial_default = 0.25});
  d.activation = arch::parse_activation(config, "hidden_act", "gelu");
  d.qkv_bias = d.o_bias = config.get_bool("attention_bias").value_or(true);
  d.mlp_bias = true;
  d.tie_word_embeddings = config.get_bool("tie_word_embeddings").value_or(false);
  arch::finish_desc(config, d);
  return d;
}

TensorNames names(const DecoderDesc& desc) {
  TensorNames n;
  n.embed = "gpt_neox.embed_in.weight";
  n.final_norm_weight = "gpt_neox.final_layer_norm.weight";
  n.final_norm_bias = "gpt_neox.final_layer_norm.bias";
  n.lm_head = "embed_out.weight";
  const std::string layer = "gpt_neox.layers.{}.";
  n.attn_norm_weight = layer + "input_layernorm.weight";
  n.attn_norm_bias = layer + "input_layernorm.bias";
  n.mlp_norm_weight = layer + "post_attention_layernorm.weight";
  n.mlp_norm_bias = layer + "post_attention_layernorm.bias";
  n.qkv_weight = {layer + "attention.query_key_value.weight"};
  n.qkv_layout = QkvLayout::PerHead;
  n.o_weight = layer + "attention.dense.weight";
  if (desc.qkv_bias) {
    n.qkv_bias = {layer + "attention.query_key_value.bias"};
    n.o_bias = layer + "attention.dense.bias";
  }
  n.up_weight = {layer + "mlp.dense_h_to_4h.weight"};
  n.up_bias = {layer + "mlp.dense_h_to_4h.bias"};
  n.down_weight = layer + "mlp.dense_4h_to_h.weight";
  n.down_bias = layer + "mlp.dense_4h_to_h.bias";
  return n;
}

}  // namespace

extern const Architecture kGptNeoXArchitecture{"GPTNeoXForCausalLM", /*fused_policy=*/true,
                                               describe, names};

}  // namespace lmx
