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

void check_quantizable(const ModelConfig& config, const LinearQuant& quant) {
  if (!quant.quantized() || !config.has("quantization_config")) return;
  const nlohmann::json& qc = config.raw()["quantization_config"];
  const std::string method = qc.is_object() && qc.contains("quant_method") && qc["quant_method"].is_string()
                                 ? qc["quant_method"].get<std::string>()
                                 : "unknown";
  throw_error("{}: the checkpoint is already quantized (quantization_config.quant_method = '{}'); "
              "option.quantize={} quantizes F32, F16 or BF16 checkpoints: point LMX at "
              "the unquantized model or leave option.quantize unset",
              config.source(), method, quant.method());
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
