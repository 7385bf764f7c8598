// --quantize none|dynamic_int8|smoothquant|fp8 [--quantize-group-size N] [--smoothquant-alpha A]
// [--smoothquant-calibration-file F] [--smoothquant-calibration-samples N]: the quantization a
// command loads the model with (engine/model/quantization.h, smoothquant/smoothquant.h,
// docs/quantization.md).
#pragma once

#include <optional>
#include <set>
#include <string>

#include "args.h"
#include "engine/model/linear.h"
#include "engine/model/model.h"
#include "smoothquant/smoothquant.h"

namespace lmx::cli {

inline constexpr const char* kQuantizeFlag = "--quantize";
inline constexpr const char* kQuantizeGroupFlag = "--quantize-group-size";
inline constexpr const char* kAlphaFlag = "--smoothquant-alpha";
inline constexpr const char* kCalibrationFileFlag = "--smoothquant-calibration-file";
inline constexpr const char* kCalibrationSamplesFlag = "--smoothquant-calibration-samples";

// The flags' help, printed after a command's usage.
inline constexpr const char* kQuantUsage =
    "  --quantize dynamic_int8 [--quantize-group-size N]: int8 weights quantized at load (per\n"
    "    output channel, or per N input columns; cuda: per output channel), activations in\n"
    "    the compute dtype\n"
    "  --quantize smoothquant [--smoothquant-alpha A] [--smoothquant-calibration-file F]\n"
    "    [--smoothquant-calibration-samples N]: W8A8 (int8 weights and per-token activations)\n"
    "    after calibrating on F (default: a text built into LMX) on the command's --device\n"
    "    (cuda: in --dtype); alpha in [0, 1], unset: searched per layer; the result is cached\n"
    "    (docs/quantization.md)\n"
    "  --quantize fp8: FP8 E4M3 weights (one scale an output channel) and per-token E4M3\n"
    "    activations (W8A8)\n";

// `flags` plus the value flags above.
std::set<std::string> with_quant_flags(std::set<std::string> flags);

struct QuantChoice {
  LinearQuant quant;                                  // dynamic_int8 (or none)
  std::optional<smoothquant::Settings> smoothquant;  // --quantize smoothquant
};

// None without --quantize; dynamic_int8 per channel, or grouped with --quantize-group-size;
// smoothquant with its settings. Throws lmx::Error naming the flag for an unknown method, a value
// out of range, or a flag that belongs to another method.
QuantChoice quant_from_args(const Args& args);

// The model loaded with that quantization (smoothquant calibrates, or reads its cache).
LoadedModel load_quantized(const std::string& model_dir, const QuantChoice& q);

}  // namespace lmx::cli
