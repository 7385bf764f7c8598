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
  arch::read_mha_sizes(config, d, {"hidden_size"}, {"num_hidden_layers"}, {"num_attention_heads"});
  d.intermediate_size = config.require_int({"intermediate_size"});
  d.max_position_embeddings = config.get_int({"max_position_embeddings"}).value_or(2048);
  d.norm_eps = arch::read_norm_eps(config, "layer_norm_eps", 1e-5);
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
  arch::norm_names(n.final_norm_weight, n.final_norm_bias, "gpt_neox.final_layer_norm");
  n.lm_head = "embed_out.weight";
  const std::string layer = "gpt_neox.layers.{}.";
  arch::norm_names(n.attn_norm_weight, n.attn_norm_bias, layer + "input_layernorm");
  arch::norm_names(n.mlp_norm_weight, n.mlp_norm_bias, layer + "post_attention_layernorm");
  arch::linear_names(n.qkv_weight, n.qkv_bias, layer + "attention.query_key_value", desc.qkv_bias);
  n.qkv_layout = QkvLayout::PerHead;
  arch::linear_names(n.o_weight, n.o_bias, layer + "attention.dense", desc.o_bias);
  arch::linear_names(n.up_weight, n.up_bias, layer + "mlp.dense_h_to_4h", true);
  arch::linear_names(n.down_weight, n.down_bias, layer + "mlp.dense_4h_to_h", true);
  return n;
}

}  // namespace

extern const Architecture kGptNeoXArchitecture{"GPTNeoXForCausalLM", /*fused_policy=*/true,
                                               describe, names};

}  // namespace lmx
