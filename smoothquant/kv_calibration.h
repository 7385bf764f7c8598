// The fp8 KV cache's per-layer scales (kernels/kv_dtype.h) when the checkpoint has none: a short
// calibration pass at load records each layer's max |K| (after rotary) and max |V| over a
// built-in text, and turns them into scales. Also the engine's choice between the checkpoint's
// scales, calibration and a fixed value (option.kv_cache_scale, docs/configuration.md).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model.h"
#include "kernels/kv_dtype.h"
#include "properties/serving_config.h"
#include "smoothquant/calibration.h"

namespace lmx::smoothquant {

// The calibration pass: kKvSamples windows of up to kKvSampleTokens tokens of the text built into
// LMX (smoothquant/calibration.txt), ~500 tokens in all: enough to meet the large K/V values a
// model makes on ordinary text (they come from a few channels and the first positions, which
// every window has), short enough that the forward stays a small part of the load.
inline constexpr int kKvSamples = 2;
inline constexpr int kKvSampleTokens = 256;
// Headroom over the calibrated max for inputs larger than the calibration text's.
inline constexpr float kKvScaleMargin = 1.25f;

// max |K| (after rotary) and max |V| of one layer's cached values, fp32.
struct KvRange {
  float k = 0.0f;
  float v = 0.0f;
};

// Runs `model` on `device` (make_calibration_backend: one GPU in the serving dtype, or the CPU
// reference in fp32) over the samples and returns [num_layers] ranges. A NaN or infinite K/V
// value is an lmx::Error naming the layer.
std::vector<KvRange> measure_kv_ranges(const LoadedModel& model, const CalibrationDevice& device,
                                       const std::vector<std::vector<int32_t>>& samples);

// The scale for a calibrated max |x|: 1 when max * kKvScaleMargin <= 448 (a model whose K/V fit
// E4M3 keeps exactly the cache it had without scales), else the smallest power of two s with
// max * kKvScaleMargin <= 448 * s. Never below 1: E4M3 is a floating-point format, so shrinking
// the scale for small values would only move the smallest ones out of the subnormals; they add
// little to a dot product that its large terms dominate. A power of two makes x / s and code * s
// exact, so the CPU reference and the CUDA kernels (which fold s into the score scale and the
// output's normalization) agree bit for bit on the rounding.
float kv_scale_for(float abs_max);

// measure_kv_ranges over the built-in text, tokenized with the model's tokenizer, as scales.
// Throws lmx::Error for a model with random benchmark weights (nothing to calibrate).
std::vector<kernels::KvScale> calibrate_kv_scales(const LoadedModel& model,
                                                  const CalibrationDevice& device);

// Sets model.kv_scales for config.kv_cache_dtype=fp8_e4m3 (nothing otherwise), following
// option.kv_cache_scale: auto = the checkpoint's scales (engine/model/kv_scales.h) when it has
// them, else calibrate_kv_scales (on calibration_device(config)); calibrate; or the fixed value for
// every layer. Logs where the scales came from and their range once.
void choose_kv_scales(LoadedModel& model, const properties::ServingConfig& config);

}  // namespace lmx::smoothquant
