// GPTJForCausalLM: one LayerNorm feeding attention and MLP in parallel
// (x = x + attn(ln(x)) + mlp(ln(x))), rotary "every two" on the first rotary_dim dims of q and k
// (the loader reorders those rows into the engine's rotate-half layout), separate q/k/v without
// biases, a plain GELU MLP with biases and a biased, untied LM head.
#include "engine/core/error.h"
#include "engine/model/architectures/common.h"

namespace lmx {
namespace {

DecoderDesc describe(const ModelConfig& config) {
  DecoderDesc d = arch::describe_layer_norm_decoder(config);
  arch::read_mha_sizes(config, d, {"n_embd", "hidden_size"}, {"n_layer", "num_hidden_layers"},
                       {"n_head", "num_attention_heads"});
  d.intermediate_size = arch::mlp_size_or_4x_hidden(config, d, {"n_inner"});
  d.max_position_embeddings = config.require_int({"n_positions", "max_position_embeddings"});
  d.norm_eps = arch::read_norm_eps(config, "layer_norm_epsilon", 1e-5);
  d.parallel_residual = d.shared_block_norm = true;
  d.positions = PositionKind::Rotary;
  // transformers 5 types rotary_dim as an int (64 when absent) and refuses null.
  if (config.raw().contains("rotary_dim") && config.raw()["rotary_dim"].is_null())
    throw_error("{}: 'rotary_dim' = null is not supported (transformers refuses it too); give the "
                "rotary width, {} for whole heads", config.source(), d.head_dim);
  const int rotary_dim = config.get_int({"rotary_dim"}).value_or(64);
  if (rotary_dim <= 0 || rotary_dim > d.head_dim || rotary_dim % 2 != 0)
    throw_error("{}: rotary_dim {} must be even and in (0, head_dim {}]", config.source(),
                rotary_dim, d.head_dim);
  d.rope.rotary_dim = rotary_dim;
  d.rope.interleaved = true;
  d.activation = arch::parse_activation(config, "activation_function", "gelu_new");
  d.mlp_bias = d.lm_head_bias = true;
  d.tie_word_embeddings = config.get_bool("tie_word_embeddings").value_or(false);
  arch::finish_desc(config, d);
  return d;
}

TensorNames names(const DecoderDesc&) {
  TensorNames n;
  n.embed = "transformer.wte.weight";
  arch::norm_names(n.final_norm_weight, n.final_norm_bias, "transformer.ln_f");
  arch::linear_names(n.lm_head, n.lm_head_bias, "lm_head", true);
  const std::string layer = "transformer.h.{}.";
  arch::norm_names(n.attn_norm_weight, n.attn_norm_bias, layer + "ln_1");
  for (const char* p : {"q_proj", "k_proj", "v_proj"}) n.qkv_weight.push_back(layer + "attn." + p + ".weight");
  n.o_weight = layer + "attn.out_proj.weight";
  arch::linear_names(n.up_weight, n.up_bias, layer + "mlp.fc_in", true);
  arch::linear_names(n.down_weight, n.down_bias, layer + "mlp.fc_out", true);
  return n;
}

}  // namespace

extern const Architecture kGptjArchitecture{"GPTJForCausalLM", /*fused_policy=*/true, describe,
                                            names};

}  // namespace lmx
