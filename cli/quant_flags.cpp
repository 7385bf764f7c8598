#include "quant_flags.h"

#include <climits>

#include "engine/core/error.h"
#include "engine/model/quantization.h"

namespace lmx::cli {

std::set<std::string> with_quant_flags(std::set<std::string> flags) {
  flags.insert({kQuantizeFlag, kQuantizeGroupFlag, kAlphaFlag, kCalibrationFileFlag,
                kCalibrationSamplesFlag});
  return flags;
}

QuantChoice quant_from_args(const Args& args) {
  const std::string method = args.get(kQuantizeFlag).value_or("none");
  const auto group = args.get_int(kQuantizeGroupFlag);
  if (method != "dynamic_int8" && group)
    throw_error("{} applies to {} dynamic_int8", kQuantizeGroupFlag, kQuantizeFlag);
  if (method != "smoothquant")
    for (const char* f : {kAlphaFlag, kCalibrationFileFlag, kCalibrationSamplesFlag})
      if (args.has(f)) throw_error("{} applies to {} smoothquant", f, kQuantizeFlag);
  if (method == "none") return {};
  if (method == "fp8") return {LinearQuant{QuantKind::Fp8}, std::nullopt};
  if (method == "dynamic_int8") {
    if (group && (*group < 1 || *group > INT_MAX))
      throw_error("{} {} is out of range", kQuantizeGroupFlag, *group);
    return {dynamic_int8(group ? std::optional<int>(int(*group)) : std::nullopt), std::nullopt};
  }
  if (method != "smoothquant")
    throw_error("{} must be dynamic_int8, smoothquant, fp8 or none, got '{}'", kQuantizeFlag,
                method);
  smoothquant::Settings s;
  if (const auto a = args.get_double(kAlphaFlag)) {
    if (!(*a >= 0.0 && *a <= 1.0))
      throw_error("{} must be a number from 0 to 1, got {}", kAlphaFlag, *args.get(kAlphaFlag));
    s.alpha = *a;
  }
  s.calibration_file = args.get(kCalibrationFileFlag).value_or("");
  // Calibration runs where the command runs the model: --device cuda in --dtype (fp16 default).
  s.device.cuda = args.get("--device").value_or("cpu") == "cuda";
  if (s.device.cuda) s.device.dtype = parse_cuda_dtype(args.get("--dtype").value_or("fp16"));
  if (const auto n = args.get_int(kCalibrationSamplesFlag)) {
    smoothquant::check_samples(*n, kCalibrationSamplesFlag);
    s.samples = int(*n);
  }
  return {{}, s};
}

LoadedModel load_quantized(const std::string& model_dir, const QuantChoice& q) {
  return smoothquant::load_quantized_model(model_dir, q.quant, q.smoothquant);
}

}  // namespace lmx::cli
