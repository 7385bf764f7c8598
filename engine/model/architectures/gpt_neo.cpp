// GPTNeoForCausalLM: GPT-2's layout with nn.Linear weights, learned positions, layers alternating
// global and local (windowed) attention per `attention_types`, q/k/v without biases, and scores
// NOT scaled by head_dim^-0.5. Head tied to the embedding.
#include "engine/core/error.h"
#include "engine/model/architectures/common.h"

namespace lmx {
namespace {

using json = nlohmann::json;

// Per layer "global" / "local": config.json's `attention_layers` when saved (transformers applies
// it last), else `attention_types` = [[["global", "local"], 12]] expanded (each entry's pattern
// repeated its count times).
std::vector<std::string> attention_layers(const ModelConfig& config, int num_layers) {
  const json& raw = config.raw();
  std::vector<std::string> layers;
  if (raw.contains("attention_layers") && !raw["attention_layers"].is_null()) {
    const json& saved = raw["attention_layers"];
    if (!saved.is_array() || int(saved.size()) != num_layers)
      throw_error("{}: 'attention_layers' must list one type per layer ({} layers), got {}",
                  config.source(), num_layers, saved.dump());
    for (const json& t : saved) layers.push_back(t.is_string() ? t.get<std::string>() : t.dump());
    return layers;
  }
  const auto bad = [&] {
    throw_error("{}: 'attention_types' must be a list of [[type, ...], count] entries, got {}",
                config.source(), raw.value("attention_types", json()).dump());
  };
  if (!raw.contains("attention_types")) return std::vector<std::string>(size_t(num_layers), "global");
  const json& types = raw["attention_types"];
  if (!types.is_array()) bad();
  for (const json& entry : types) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_array() ||
        !entry[1].is_number_integer() || entry[1].get<int>() < 0)
      bad();
    for (int i = 0; i < entry[1].get<int>(); ++i)
      for (const json& t : entry[0]) {
        if (!t.is_string()) bad();
        layers.push_back(t.get<std::string>());
      }
  }
  if (int(layers.size()) != num_layers)
    throw_error("{}: 'attention_types' describes {} layers, the model has num_layers = {}",
                config.source(), layers.size(), num_layers);
  return layers;
}

DecoderDesc describe(const ModelConfig& config) {
  DecoderDesc d = arch::describe_layer_norm_decoder(config);
  arch::read_mha_sizes(config, d, {"hidden_size"}, {"num_layers", "num_hidden_layers"},
                       {"num_heads", "num_attention_heads"});
  d.intermediate_size = arch::mlp_size_or_4x_hidden(config, d, {"intermediate_size"});
  d.max_position_embeddings = config.require_int({"max_position_embeddings"});
  d.norm_eps = arch::read_norm_eps(config, "layer_norm_epsilon", 1e-5);
  d.positions = PositionKind::LearnedAbsolute;
  d.activation = arch::parse_activation(config, "activation_function", "gelu_new");
  d.scale_attention = false;
  d.o_bias = d.mlp_bias = true;
  d.tie_word_embeddings = config.get_bool("tie_word_embeddings").value_or(true);
  const int window = config.get_int({"window_size"}).value_or(256);
  d.sliding_window.assign(size_t(d.num_layers), 0);
  const auto layers = attention_layers(config, d.num_layers);
  for (int l = 0; l < d.num_layers; ++l) {
    if (layers[size_t(l)] == "global") continue;
    if (layers[size_t(l)] != "local")
      throw_error("{}: attention type '{}' of layer {} is not supported (global, local)",
                  config.source(), layers[size_t(l)], l);
    if (window <= 0)
      throw_error("{}: window_size {} must be positive for local layers", config.source(), window);
    d.sliding_window[size_t(l)] = window;
  }
  arch::finish_desc(config, d);
  return d;
}

TensorNames names(const DecoderDesc&) {
  TensorNames n;
  n.optional_prefix = "transformer.";
  n.embed = "transformer.wte.weight";
  n.position_embed = "transformer.wpe.weight";
  arch::norm_names(n.final_norm_weight, n.final_norm_bias, "transformer.ln_f");
  n.lm_head = "lm_head.weight";
  const std::string layer = "transformer.h.{}.";
  arch::norm_names(n.attn_norm_weight, n.attn_norm_bias, layer + "ln_1");
  for (const char* p : {"q_proj", "k_proj", "v_proj"})
    n.qkv_weight.push_back(layer + "attn.attention." + p + ".weight");
  arch::linear_names(n.o_weight, n.o_bias, layer + "attn.attention.out_proj", true);
  arch::norm_names(n.mlp_norm_weight, n.mlp_norm_bias, layer + "ln_2");
  arch::linear_names(n.up_weight, n.up_bias, layer + "mlp.c_fc", true);
  arch::linear_names(n.down_weight, n.down_bias, layer + "mlp.c_proj", true);
  return n;
}

}  // namespace

extern const Architecture kGptNeoArchitecture{"GPTNeoForCausalLM", /*fused_policy=*/true,
                                              describe, names};

}  // namespace lmx
