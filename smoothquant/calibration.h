// SmoothQuant calibration: run the fp32 model (CPU reference) over token samples and record, at
// the input of every decoder projection, the per-input-channel max |activation| and a sample of
// the input rows (for the alpha search). docs/quantization.md, "smoothquant".
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend/activation_observer.h"
#include "engine/model/model.h"

namespace lmx::smoothquant {

// One projection input of one layer.
struct InputStats {
  std::vector<float> abs_max;  // [in]: max over every calibration token of |x[t, j]|
  std::vector<float> rows;     // [kept, in]: the first rows seen, up to the observer's cap
  int64_t tokens = 0;          // tokens observed
  int64_t in = 0;
  int64_t kept() const { return in > 0 ? int64_t(rows.size()) / in : 0; }
};

// Per layer, per LinearSlot (qkv, o, up, down).
using LayerStats = std::array<InputStats, kLinearSlots>;

// The observer calibration hands the CPU backend: accumulates InputStats, keeping up to
// `keep_rows` input rows of each qkv and up input (the projections SmoothQuant smooths).
class StatsCollector final : public ActivationObserver {
 public:
  StatsCollector(int layers, int64_t keep_rows);
  void observe(int layer, LinearSlot slot, const float* x, int rows, int in) override;
  const std::vector<LayerStats>& stats() const { return stats_; }

 private:
  std::vector<LayerStats> stats_;
  int64_t keep_rows_;
};

// Told after each calibration sample: (samples done, samples in all).
using CalibrationProgress = std::function<void(size_t done, size_t total)>;

// Runs `model` on the CPU reference backend (fp32, the model-dtype KV cache) over each sample
// (one prefill a sample, from position 0), showing `observer` every projection input and the
// K/V each layer caches. Throws lmx::Error if a sample is empty or longer than the model's
// positions, or the model cannot run on the CPU (random benchmark weights).
void run_calibration(const LoadedModel& model, const std::vector<std::vector<int32_t>>& samples,
                     ActivationObserver& observer, const CalibrationProgress& progress = {});

// Runs `model` (no quantization; CPU, fp32) over each sample (one prefill a sample) and returns
// the statistics. Throws lmx::Error if the model is marked quantized or a sample is empty or
// longer than the model's positions.
std::vector<LayerStats> calibrate(const LoadedModel& model,
                                  const std::vector<std::vector<int32_t>>& samples,
                                  int64_t keep_rows, const CalibrationProgress& progress = {});

}  // namespace lmx::smoothquant
