// From calibration statistics to what the loader marks: per layer the smoothing factors of the
// qkv and gate/up inputs (alpha fixed or searched) and every decoder projection set to W8A8.
//
// What is smoothed (as SmoothQuant's paper and mit-han-lab/smoothquant do): the inputs that a norm
// produces, qkv after the attention norm and gate/up (fc1) after the MLP norm; one s for both
// under a shared block norm (GPT-J). Folding 1/s into that norm is exact when the norm's output
// feeds only those projections: pre-norm layers without residual_from_norm (Bloom's option). In
// post-norm layers (OPT-350m) or with residual_from_norm the input is also the residual, so the
// projection keeps an explicit 1/s on its activations instead. o and down (fc2) are W8A8 without
// smoothing, as in the reference implementation: their inputs (attention output, the activation
// function's output) have no norm to fold into, and per-token quantization handles them.
// The LM head and OPT's project_in / project_out stay unquantized (the paper keeps them in 16 bits).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "engine/backend/smoothing_scorer.h"
#include "engine/model/model.h"
#include "smoothquant/calibration.h"

namespace lmx::smoothquant {

struct LayerPlan {
  double alpha = 0.0;
  double error = 0.0;  // relative W8A8 output error of qkv + up on the calibration rows at alpha
  std::shared_ptr<const std::vector<float>> qkv, up;  // s [hidden]; the same vector when shared
};

struct Plan {
  std::vector<LayerPlan> layers;
  bool searched = false;  // alpha chosen per layer from alpha_grid()
  bool in_norm = false;   // 1/s folded into the norms (else explicit on the activations)
};

// Whether a projection input produced by a norm can take 1/s into that norm exactly.
bool folds_into_norm(const DecoderDesc& desc);

// Smoothing factors for every layer of the decoder `desc` from `stats`: with `alpha` fixed, or
// per layer the grid alpha whose W8A8 output error on the kept calibration rows is least, summed
// over the smoothed inputs (each input's error relative to its projections' output:
// SmoothingScorer's error / reference). The weight maxima and errors come from `scorer`, the
// calibration backend's (Calibrator::scorer). Throws lmx::Error when the statistics do not
// match the model or an input searched has no rows.
Plan make_plan(const DecoderDesc& desc, const std::vector<LayerStats>& stats,
               std::optional<double> alpha, SmoothingScorer& scorer);

// make_plan on a fresh calibration: a Calibrator for `model` on `device` keeping `keep_rows`
// rows, run over `samples`.
Plan calibrate_and_plan(const LoadedModel& model, const CalibrationDevice& device,
                        const std::vector<std::vector<int32_t>>& samples, int64_t keep_rows,
                        std::optional<double> alpha, const CalibrationProgress& progress = {});

// Marks qkv, o, up and down of every layer W8A8 with the plan's smoothing. Throws lmx::Error when
// the plan's layers or sizes do not match the model.
void mark(LoadedModel& model, const Plan& plan);

}  // namespace lmx::smoothquant
