#include "engine/model/quantization.h"

#include "engine/core/error.h"
#include "properties/config_enums.h"

namespace lmx {

LinearQuant dynamic_int8(std::optional<int> group_size) {
  if (!group_size) return {QuantKind::W8A16PerChannel, 0};
  if (!properties::valid_quantize_group_size(*group_size))
    throw_error("quantization group size {} is not {}", *group_size,
                properties::kQuantizeGroupSizeAllowed);
  return {QuantKind::W8A16Grouped, *group_size};
}

LinearQuant linear_quant(properties::Quantize method, std::optional<int> group_size) {
  switch (method) {
    case properties::Quantize::None:
      return {};
    case properties::Quantize::DynamicInt8:
      return dynamic_int8(group_size);
    case properties::Quantize::Fp8:
      return {QuantKind::Fp8};
    case properties::Quantize::SmoothQuant:  // loads unquantized, then calibrates and marks
      return {};                             // (smoothquant/smoothquant.h)
  }
  throw_error("option.quantize={}: unknown method", int(method));
}

namespace {

constexpr int64_t kFp8Block = 128;  // the one weight_block_size side LMX loads

// obj[key] of type T, `fallback` when absent or null; an error naming `where`.key otherwise.
template <typename T>
T member(const ModelConfig& config, const nlohmann::json& obj, const char* key, T fallback,
         const std::string& where) {
  if (!obj.contains(key) || obj[key].is_null()) return fallback;
  try {
    return obj[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw_error("{}: quantization_config {}{} = {} has the wrong type", config.source(), where,
                key, obj[key].dump());
  }
}

std::string quant_method(const nlohmann::json& qc) {
  return qc.is_object() && qc.contains("quant_method") && qc["quant_method"].is_string()
             ? qc["quant_method"].get<std::string>()
             : "unknown";
}

// compressed-tensors' quantization args for weights or input activations of one config group:
// 8-bit symmetric float, the strategies LMX honours. `what` names it in errors.
void check_float8_args(const ModelConfig& config, const nlohmann::json& args, const std::string& what,
                       std::initializer_list<const char*> strategies) {
  const auto value = [&](const char* key) -> std::string {
    return args.contains(key) ? args[key].dump() : "missing";
  };
  if (!args.is_object())
    throw_error("{}: quantization_config {} is not an object", config.source(), what);
  const std::string at = what + ".";
  if (member(config, args, "num_bits", 0, at) != 8 ||
      member(config, args, "type", std::string(), at) != "float")
    throw_error("{}: quantization_config {} has num_bits {} and type {}: LMX loads 8-bit float "
                "(fp8 E4M3) compressed-tensors checkpoints only",
                config.source(), what, value("num_bits"), value("type"));
  if (!member(config, args, "symmetric", true, at))
    throw_error("{}: quantization_config {} is asymmetric: fp8 checkpoints are symmetric",
                config.source(), what);
  const std::string strategy = member(config, args, "strategy", std::string(), at);
  for (const char* s : strategies)
    if (strategy == s) return;
  throw_error("{}: quantization_config {} strategy {} is not supported (LMX loads fp8 weights "
              "scaled per tensor or per output channel, e.g. not block- or group-scaled ones)",
              config.source(), what, value("strategy"));
}

CheckpointFp8 compressed_tensors(const ModelConfig& config, const nlohmann::json& qc) {
  const std::string format = member(config, qc, "format", std::string(), "");
  if (format != "float-quantized" && format != "naive-quantized")
    throw_error("{}: compressed-tensors format '{}' is not supported (LMX loads fp8 checkpoints: "
                "float-quantized or naive-quantized)",
                config.source(), format);
  if (!qc.contains("config_groups") || !qc["config_groups"].is_object() ||
      qc["config_groups"].empty())
    throw_error("{}: compressed-tensors quantization_config has no config_groups", config.source());
  CheckpointFp8 fp8{"compressed-tensors", false};
  for (const auto& [name, group] : qc["config_groups"].items()) {
    const std::string where = "config_groups." + name;
    if (!group.is_object() || !group.contains("weights"))
      throw_error("{}: quantization_config {} has no weights", config.source(), where);
    check_float8_args(config, group["weights"], where + ".weights", {"tensor", "channel"});
    if (group.contains("input_activations") && !group["input_activations"].is_null()) {
      const nlohmann::json& in = group["input_activations"];
      check_float8_args(config, in, where + ".input_activations", {"tensor", "token"});
      fp8.static_input_scales |= !member(config, in, "dynamic", false, where + ".input_activations.");
    }
  }
  return fp8;
}

}  // namespace

std::optional<CheckpointFp8> checkpoint_fp8(const ModelConfig& config) {
  if (!config.has("quantization_config")) return std::nullopt;
  const nlohmann::json& qc = config.raw()["quantization_config"];
  const std::string method = quant_method(qc);
  if (method == "compressed-tensors") return compressed_tensors(config, qc);
  if (method == "fp8") {
    const bool static_inputs =
        member(config, qc, "activation_scheme", std::string(), "") == "static";
    if (!qc.contains("weight_block_size") || qc["weight_block_size"].is_null())
      return CheckpointFp8{"fp8 (AutoFP8)", static_inputs};
    const nlohmann::json& block = qc["weight_block_size"];
    if (block != nlohmann::json::array({kFp8Block, kFp8Block}))
      throw_error(
          "{}: quantization_config.weight_block_size {} is not supported: LMX loads "
          "block-scaled fp8 checkpoints with [{}, {}] blocks (transformers' FP8 layout)",
          config.source(), block.dump(), kFp8Block, kFp8Block);
    return CheckpointFp8{"fp8 (block-scaled 128 x 128)", static_inputs, kFp8Block};
  }
  throw_error(
      "{}: the checkpoint is already quantized (quantization_config.quant_method = '{}'), "
      "which LMX does not load: point it at the F32 / F16 / BF16 model (option.quantize "
      "then quantizes it) or at an fp8 checkpoint (compressed-tensors, AutoFP8 or "
      "block-scaled fp8)",
      config.source(), method);
}

void check_quantizable(const ModelConfig& config, const LinearQuant& quant) {
  const std::optional<CheckpointFp8> fp8 = checkpoint_fp8(config);
  if (!fp8 || !quant.quantized() || quant.kind == QuantKind::Fp8) return;
  throw_error("{}: the checkpoint is already quantized ({} fp8); option.quantize={} quantizes F32, "
              "F16 or BF16 checkpoints: leave option.quantize unset (or fp8) for this one, or point "
              "LMX at the unquantized model",
              config.source(), fp8->layout, quant.method());
}

void request_quantization(ModelWeights<WeightRef>& weights, const LinearQuant& quant) {
  if (quant.quantizes_activations()) {  // fp8, or benchmarks: smoothquant's projections unsmoothed
    for (LayerWeights<WeightRef>& l : weights.layers)
      for (LinearRef* p : {&l.qkv, &l.o, &l.up, &l.down}) p->quant = quant;
    return;
  }
  for_each_linear(weights, [&](LinearRef& l, const std::string& label) {
    const int64_t group = quant.group_for(l.in);
    if (group <= 0 || l.in % group != 0)
      throw_error("{} ({}, weight [{}, {}]): quantization group size {} does not divide its {} "
                  "input columns; choose a group size that divides every projection's input size",
                  label, l.weight.present() ? l.weight.name : "tied to the embedding", l.out, l.in,
                  group, l.in);
    l.quant = quant;
  });
}

}  // namespace lmx
