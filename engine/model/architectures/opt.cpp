// OPTForCausalLM: learned positions at row position + 2, LayerNorm before (do_layer_norm_before)
// or after each block (post-norm, opt-350m: no final norm), ReLU MLP, biases per enable_bias,
// word_embed_proj_dim != hidden_size with project_in / project_out around the decoder, head tied
// to the embedding.
#include "engine/core/error.h"
#include "engine/model/architectures/common.h"

namespace lmx {
namespace {

DecoderDesc describe(const ModelConfig& config) {
  arch::require_value(config, "layer_norm_elementwise_affine", true);
  DecoderDesc d = arch::describe_layer_norm_decoder(config);
  arch::read_mha_sizes(config, d, {"hidden_size"}, {"num_hidden_layers"}, {"num_attention_heads"});
  d.embed_dim = config.get_int({"word_embed_proj_dim"}).value_or(d.hidden_size);
  d.intermediate_size = config.require_int({"ffn_dim"});
  d.max_position_embeddings = config.get_int({"max_position_embeddings"}).value_or(2048);
  d.positions = PositionKind::LearnedAbsolute;
  d.position_offset = 2;  // OPTLearnedPositionalEmbedding's offset
  const bool pre_norm = config.get_bool("do_layer_norm_before").value_or(true);
  d.norm_placement = pre_norm ? NormPlacement::Pre : NormPlacement::Post;
  d.final_norm = pre_norm && !config.get_bool("_remove_final_layer_norm").value_or(false);
  d.activation = arch::parse_activation(config, "activation_function", "relu");
  d.qkv_bias = d.o_bias = d.mlp_bias = config.get_bool("enable_bias").value_or(true);
  d.tie_word_embeddings = config.get_bool("tie_word_embeddings").value_or(true);
  arch::finish_desc(config, d);
  return d;
}

TensorNames names(const DecoderDesc& desc) {
  TensorNames n;
  n.optional_prefix = "model.";  // hub checkpoints store "decoder.layers...."
  n.embed = "model.decoder.embed_tokens.weight";
  n.position_embed = "model.decoder.embed_positions.weight";
  n.project_in = "model.decoder.project_in.weight";
  n.project_out = "model.decoder.project_out.weight";
  arch::norm_names(n.final_norm_weight, n.final_norm_bias, "model.decoder.final_layer_norm");
  n.lm_head = "lm_head.weight";
  const std::string layer = "model.decoder.layers.{}.";
  arch::norm_names(n.attn_norm_weight, n.attn_norm_bias, layer + "self_attn_layer_norm");
  for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
    n.qkv_weight.push_back(layer + "self_attn." + p + ".weight");
    if (desc.qkv_bias) n.qkv_bias.push_back(layer + "self_attn." + p + ".bias");
  }
  arch::linear_names(n.o_weight, n.o_bias, layer + "self_attn.out_proj", desc.o_bias);
  // The layer's own "final_layer_norm" is its MLP norm, not the decoder's final norm.
  arch::norm_names(n.mlp_norm_weight, n.mlp_norm_bias, layer + "final_layer_norm");
  arch::linear_names(n.up_weight, n.up_bias, layer + "fc1", desc.mlp_bias);
  arch::linear_names(n.down_weight, n.down_bias, layer + "fc2", desc.mlp_bias);
  return n;
}

}  // namespace

extern const Architecture kOptArchitecture{"OPTForCausalLM", /*fused_policy=*/true, describe,
                                           names};

}  // namespace lmx
