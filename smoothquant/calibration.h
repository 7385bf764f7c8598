// SmoothQuant calibration: run the unquantized model over token samples, on the GPU in the
// serving dtype (or the CPU reference in fp32), and record at the input of every decoder
// projection the per-input-channel max |activation| and the first input rows (for the alpha
// search). The backend reduces on its own device (engine/backend/activation_observer.h) and then
// scores the alpha search on it too (engine/backend/smoothing_scorer.h). docs/quantization.md,
// "smoothquant".
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/activation_observer.h"
#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/smoothing_scorer.h"
#include "engine/model/model.h"

namespace lmx::smoothquant {

// Where calibration runs.
struct CalibrationDevice {
  bool cuda = false;
  // cuda: the activations' dtype; unset: the model's serving default (auto_cuda_dtype).
  std::optional<CudaDtype> dtype;
  int gpu = 0;  // cuda: the GPU
  // Tensor-parallel ranks the model is split over while it calibrates, threads of this process
  // (engine/parallel/rank_group.h) each holding its slices (engine/model/shard.h): the CPU backend
  // only for now (cuda calibrates on one GPU; ranks > 1 there is an lmx::Error).
  int ranks = 1;
  // "cpu (fp32)", "cpu (fp32) x 2 ranks" or "cuda:0 (bf16)", `model`'s dtype resolved.
  std::string describe(const LoadedModel& model) const;
};

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

// The observer calibration hands the backend: accumulates InputStats, keeping up to `keep_rows`
// input rows of each qkv and up input (the projections SmoothQuant smooths). A non-finite
// activation is an lmx::Error naming the layer.
class StatsCollector final : public ActivationObserver {
 public:
  StatsCollector(int layers, int64_t keep_rows);
  int rows_wanted(int layer, LinearSlot slot) const override;
  void observe(int layer, LinearSlot slot, const InputSummary& x) override;
  const std::vector<LayerStats>& stats() const { return stats_; }

 private:
  std::vector<LayerStats> stats_;
  int64_t keep_rows_;
};

// Told after each calibration sample: (samples done, samples in all).
using CalibrationProgress = std::function<void(size_t done, size_t total)>;

// The CUDA backend's options for calibration (CudaBackendOptions::observer): `dtype` on GPU
// `gpu`, unfused decode, no graphs, no GEMM tuning, a KV cache for one sequence of `max_tokens`.
// `fused`: the architecture's kernel-injection policy.
CudaBackendOptions calibration_cuda_options(CudaDtype dtype, int gpu, ActivationObserver& observer,
                                            int max_tokens, bool fused);

// A backend for `model` (unquantized) on `device` that shows `observer` every forward: one GPU
// (unfused, no graphs, a KV cache for one sequence of `max_tokens`) or the CPU reference. Throws
// lmx::Error where the device cannot run it (no GPU, no CUDA backend in this build, random
// weights on the CPU) and for device.ranks != 1 (Calibrator splits the model itself).
std::unique_ptr<Backend> make_calibration_backend(const LoadedModel& model,
                                                  const CalibrationDevice& device,
                                                  ActivationObserver& observer, int max_tokens);

// Runs `backend` (made by make_calibration_backend, or any backend with an observer) over each
// sample: one prefill a sample from position 0. Throws lmx::Error if a sample is empty or
// longer than the model's positions or the backend's cache.
void run_calibration(Backend& backend, const std::vector<std::vector<int32_t>>& samples,
                     const CalibrationProgress& progress = {});

// The longest sample's length (at least 1).
int longest_sample(const std::vector<std::vector<int32_t>>& samples);

// One calibration: a calibration backend for `model` on `device` with a StatsCollector keeping
// `keep_rows` rows, for samples of up to `max_tokens`; run() the samples, then the statistics
// and the backend's alpha search (make_plan). The backend holds the unquantized model until the
// Calibrator is destroyed. Throws lmx::Error as make_calibration_backend, and if the model is
// marked quantized.
// Over `device.ranks` > 1 ranks each rank holds its slices and its own StatsCollector: the
// statistics are the whole model's (qkv and up inputs are every rank's whole input: rank 0's;
// o's and down's are each rank's columns, joined in rank order), and the alpha search combines
// the ranks' (sharded_scorer.h).
class Calibrator {
 public:
  Calibrator(const LoadedModel& model, const CalibrationDevice& device, int64_t keep_rows,
             int max_tokens);
  Calibrator(const Calibrator&) = delete;  // the backends hold references to the collectors
  Calibrator& operator=(const Calibrator&) = delete;
  ~Calibrator();
  void run(const std::vector<std::vector<int32_t>>& samples,
           const CalibrationProgress& progress = {});
  // The statistics of the samples run so far (over ranks > 1: as of the last run()).
  const std::vector<LayerStats>& stats() const;
  SmoothingScorer& scorer();

 private:
  std::vector<std::unique_ptr<StatsCollector>> collectors_;  // one a rank
  std::vector<Backend*> ranks_;       // each rank's backend (owned by backend_), rank order
  std::unique_ptr<Backend> backend_;  // rank 0 (leading the others over ranks > 1)
  std::vector<LayerStats> joined_;    // ranks > 1: the whole model's, joined after run()
  std::unique_ptr<SmoothingScorer> sharded_;
};

}  // namespace lmx::smoothquant
