#include "engine/model/architectures/common.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/error.h"

namespace lmx::arch {
namespace {

using json = nlohmann::json;

double number_or(const json& obj, const char* key, double fallback, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw_error("{}: '{}' must be a number, got {}", where, key, it->dump());
  return it->get<double>();
}

// A rope scaling factor: a positive number an fp32 can hold.
float positive_factor(const json& obj, const char* key, double fallback, const std::string& where) {
  const double v = number_or(obj, key, fallback, where);
  if (!(v > 0.0) || !(v <= double(std::numeric_limits<float>::max())))
    throw_error("{}: '{}' = {} must be a positive finite number", where, key, v);
  return float(v);
}

// A position count: a whole number from 1 to 2^31 - 1.
int positive_count(const json& obj, const char* key, double fallback, const std::string& where) {
  const double v = number_or(obj, key, fallback, where);
  if (!(v >= 1.0 && v <= double(std::numeric_limits<int>::max())) || v != std::floor(v))
    throw_error("{}: '{}' = {} must be a whole number from 1 to {}", where, key, v,
                std::numeric_limits<int>::max());
  return int(v);
}

}  // namespace

float read_norm_eps(const ModelConfig& config, const char* key, double fallback) {
  const double eps = config.get_double({key}).value_or(fallback);
  if (!(eps > 0.0) || !std::isfinite(float(eps)))
    throw_error("{}: {} = {} must be a positive finite number", config.source(), key, eps);
  return float(eps);
}

int read_layer_count(const ModelConfig& config, std::initializer_list<const char*> keys) {
  const int n = config.require_int(keys);
  if (n <= 0) {
    const char* key = *keys.begin();
    for (const char* k : keys)
      if (config.raw().contains(k)) {
        key = k;
        break;
      }
    throw_error("{}: {} = {} must be positive", config.source(), key, n);
  }
  return n;
}

RopeDesc read_rope(const ModelConfig& config, int head_dim, RopeLegacyKeys legacy) {
  const json& raw = config.raw();
  RopeDesc rope;
  json params = json::object();  // rope_type and its factors
  std::string where = config.source();
  if (raw.contains("rope_parameters") && !raw["rope_parameters"].is_null()) {
    params = raw["rope_parameters"];
    where += ": rope_parameters";
    if (!params.is_object() || !(params.contains("rope_type") || params.contains("rope_theta")))
      throw_error(
          "{} must be an object with 'rope_type' and 'rope_theta' (per-layer-type rope "
          "parameters are not supported)",
          where);
    rope.theta = float(number_or(params, "rope_theta", 10000.0, where));
  } else {
    rope.theta = float(config.get_double({legacy.theta}).value_or(10000.0));
    if (raw.contains("rope_scaling") && !raw["rope_scaling"].is_null()) {
      params = raw["rope_scaling"];
      where += ": rope_scaling";
      if (!params.is_object()) throw_error("{} must be an object or null", where);
    }
  }

  if (!(rope.theta > 0.0f) || !std::isfinite(rope.theta))  // inv_freq = theta^(-2i/d): undefined
    throw_error("{}: rope_theta ({}) = {} must be a positive finite number", config.source(),
                params.contains("rope_theta") ? "rope_parameters" : legacy.theta, rope.theta);
  const double partial =
      number_or(params, "partial_rotary_factor",
                config.get_double({legacy.partial}).value_or(legacy.partial_default), where);
  if (partial <= 0.0 || partial > 1.0)
    throw_error("{}: partial_rotary_factor {} must be in (0, 1]", config.source(), partial);
  rope.rotary_dim = int(head_dim * partial);  // truncates, as transformers does
  if (rope.rotary_dim % 2 != 0 || rope.rotary_dim == 0)
    throw_error(
        "{}: rotary dimension {} (head_dim {} x partial_rotary_factor {}) must be even "
        "and positive",
        config.source(), rope.rotary_dim, head_dim, partial);

  std::string type = "default";
  for (const char* key : {"rope_type", "type"})
    if (params.contains(key) && params[key].is_string()) {
      type = params[key].get<std::string>();
      break;
    }
  if (type == "default") {
    rope.scaling = RopeScalingKind::None;
  } else if (type == "linear") {
    rope.scaling = RopeScalingKind::Linear;
    rope.factor = positive_factor(params, "factor", 1.0, where);
  } else if (type == "llama3") {
    rope.scaling = RopeScalingKind::Llama3;
    rope.factor = positive_factor(params, "factor", 8.0, where);
    rope.low_freq_factor = positive_factor(params, "low_freq_factor", 1.0, where);
    rope.high_freq_factor = positive_factor(params, "high_freq_factor", 4.0, where);
    rope.original_max_position =
        positive_count(params, "original_max_position_embeddings", 8192, where);
    if (rope.high_freq_factor <= rope.low_freq_factor)
      throw_error("{}: llama3 high_freq_factor {} must exceed low_freq_factor {}", where,
                  rope.high_freq_factor, rope.low_freq_factor);
  } else {
    throw_error("{}: rope type '{}' is not supported (supported: default, linear, llama3)", where,
                type);
  }
  if (rope.factor <= 0.0f) throw_error("{}: rope factor must be positive", where);
  return rope;
}

void require_value(const ModelConfig& config, const char* key, const json& supported) {
  auto it = config.raw().find(key);
  if (it == config.raw().end() || it->is_null() || *it == supported) return;
  throw_error("{}: '{}' = {} is not supported (LMX implements {} only)", config.source(), key,
              it->dump(), supported.dump());
}

Activation parse_activation(const ModelConfig& config, const char* key,
                            const std::string& fallback) {
  const std::string name = config.get_string(key).value_or(fallback);
  if (name == "silu" || name == "swish") return Activation::Silu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast")
    return Activation::GeluTanh;
  if (name == "gelu") return Activation::GeluExact;
  if (name == "relu") return Activation::Relu;
  throw_error(
      "{}: '{}' = '{}' is not supported (supported: silu, swish, gelu, gelu_new, "
      "gelu_pytorch_tanh, gelu_fast, relu)",
      config.source(), key, name);
}

std::vector<int> read_sliding_windows(const ModelConfig& config, int num_layers,
                                      const std::function<int(int)>& fallback) {
  std::vector<int> windows(num_layers, 0);
  const json& raw = config.raw();
  if (!raw.contains("layer_types") || raw["layer_types"].is_null()) {
    for (int i = 0; i < num_layers; ++i) windows[i] = fallback(i);
    return windows;
  }
  const json& types = raw["layer_types"];
  if (!types.is_array() || int(types.size()) != num_layers)
    throw_error("{}: 'layer_types' must list one type per layer ({} layers)", config.source(),
                num_layers);
  for (int i = 0; i < num_layers; ++i) {
    const std::string t = types[i].is_string() ? types[i].get<std::string>() : types[i].dump();
    if (t == "full_attention") continue;
    if (t != "sliding_attention")
      throw_error("{}: layer_types[{}] = '{}' is not supported (full_attention, sliding_attention)",
                  config.source(), i, t);
    auto w = config.get_int({"sliding_window"});
    if (!w || *w <= 0)
      throw_error(
          "{}: layer {} is sliding_attention but 'sliding_window' is not a positive integer",
          config.source(), i);
    windows[i] = *w;
  }
  return windows;
}

DecoderDesc describe_llama_like(const ModelConfig& config, bool tie_default) {
  DecoderDesc d;
  d.architecture = config.architecture();
  d.vocab_size = config.require_int({"vocab_size"});
  d.hidden_size = config.require_int({"hidden_size"});
  d.num_layers = read_layer_count(config, {"num_hidden_layers"});
  d.num_heads = config.require_int({"num_attention_heads"});
  d.num_kv_heads = config.get_int({"num_key_value_heads"}).value_or(d.num_heads);
  if (d.num_heads <= 0) throw_error("{}: num_attention_heads must be positive", config.source());
  d.head_dim = config.get_int({"head_dim"}).value_or(d.hidden_size / d.num_heads);
  d.intermediate_size = config.require_int({"intermediate_size"});
  d.max_position_embeddings = config.get_int({"max_position_embeddings"}).value_or(2048);
  d.norm = NormKind::RmsNorm;
  d.norm_eps = read_norm_eps(config, "rms_norm_eps", 1e-6);
  d.positions = PositionKind::Rotary;
  d.rope = read_rope(config, d.head_dim);
  d.mlp = MlpKind::Gated;
  d.activation = parse_activation(config, "hidden_act", "silu");
  d.tie_word_embeddings = config.get_bool("tie_word_embeddings").value_or(tie_default);
  d.sliding_window.assign(d.num_layers, 0);
  return d;
}

void read_mha_sizes(const ModelConfig& config, DecoderDesc& d,
                    std::initializer_list<const char*> hidden_keys,
                    std::initializer_list<const char*> layer_keys,
                    std::initializer_list<const char*> head_keys) {
  d.vocab_size = config.require_int({"vocab_size"});
  d.hidden_size = config.require_int(hidden_keys);
  d.num_layers = read_layer_count(config, layer_keys);
  d.num_heads = d.num_kv_heads = config.require_int(head_keys);
  if (d.num_heads <= 0 || d.hidden_size % d.num_heads != 0)
    throw_error("{}: hidden size {} is not a multiple of the {} attention heads", config.source(),
                d.hidden_size, d.num_heads);
  d.head_dim = d.hidden_size / d.num_heads;
}

int mlp_size_or_4x_hidden(const ModelConfig& config, const DecoderDesc& d,
                          std::initializer_list<const char*> keys) {
  if (const std::optional<int> v = config.get_int(keys)) return *v;
  const int64_t size = 4 * int64_t(d.hidden_size);
  if (size > std::numeric_limits<int>::max())
    throw_error("{}: hidden size {} is too large (the MLP's default width, 4 x hidden, passes {})",
                config.source(), d.hidden_size, std::numeric_limits<int>::max());
  return int(size);
}

void norm_names(std::string& weight, std::string& bias, const std::string& module) {
  weight = module + ".weight";
  bias = module + ".bias";
}

void linear_names(std::string& weight, std::string& bias, const std::string& module,
                  bool has_bias) {
  weight = module + ".weight";
  bias = has_bias ? module + ".bias" : "";
}

void linear_names(std::vector<std::string>& weight, std::vector<std::string>& bias,
                  const std::string& module, bool has_bias) {
  weight = {module + ".weight"};
  bias = has_bias ? std::vector<std::string>{module + ".bias"} : std::vector<std::string>{};
}

DecoderDesc describe_layer_norm_decoder(const ModelConfig& config) {
  DecoderDesc d;
  d.architecture = config.architecture();
  d.norm = NormKind::LayerNorm;
  d.norm_eps = 1e-5f;
  d.mlp = MlpKind::Plain;
  return d;
}

TensorNames llama_style_names(const DecoderDesc& desc) {
  TensorNames n;
  n.embed = "model.embed_tokens.weight";
  n.final_norm_weight = "model.norm.weight";
  n.lm_head = "lm_head.weight";
  const std::string layer = "model.layers.{}.";
  n.attn_norm_weight = layer + "input_layernorm.weight";
  n.mlp_norm_weight = layer + "post_attention_layernorm.weight";
  for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
    n.qkv_weight.push_back(layer + "self_attn." + p + ".weight");
    if (desc.qkv_bias) n.qkv_bias.push_back(layer + "self_attn." + p + ".bias");
  }
  n.o_weight = layer + "self_attn.o_proj.weight";
  if (desc.o_bias) n.o_bias = layer + "self_attn.o_proj.bias";
  for (const char* p : {"gate_proj", "up_proj"}) {
    n.up_weight.push_back(layer + "mlp." + p + ".weight");
    if (desc.mlp_bias) n.up_bias.push_back(layer + "mlp." + p + ".bias");
  }
  n.down_weight = layer + "mlp.down_proj.weight";
  if (desc.mlp_bias) n.down_bias = layer + "mlp.down_proj.bias";
  return n;
}

void finish_desc(const ModelConfig& config, DecoderDesc& d) {
  if (d.embed_dim == 0) d.embed_dim = d.hidden_size;
  if (d.sliding_window.empty()) d.sliding_window.assign(size_t(std::max(d.num_layers, 0)), 0);
  d.bos_token_id = config.bos_token_id();
  d.eos_token_ids = config.eos_token_ids();
  const auto positive = [&](int v, const char* what) {
    if (v <= 0) throw_error("{}: {} must be positive, got {}", config.source(), what, v);
  };
  positive(d.vocab_size, "vocab size");
  positive(d.hidden_size, "hidden size");
  positive(d.embed_dim, "embedding width");
  positive(d.num_heads, "number of attention heads");
  positive(d.num_layers, "number of layers");
  positive(d.num_kv_heads, "number of key/value heads");
  positive(d.head_dim, "head dimension");
  positive(d.intermediate_size, "intermediate size");
  positive(d.max_position_embeddings, "max_position_embeddings");
  if (d.positions == PositionKind::Rotary && d.rope.interleaved && d.rope.rotary_dim % 2 != 0)
    throw_error("{}: rotary dimension {} must be even", config.source(), d.rope.rotary_dim);
  if (d.num_heads % d.num_kv_heads != 0)
    throw_error("{}: {} attention heads are not a multiple of {} key/value heads", config.source(),
                d.num_heads, d.num_kv_heads);
}

}  // namespace lmx::arch
