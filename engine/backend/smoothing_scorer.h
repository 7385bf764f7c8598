// What smoothquant's alpha search (smoothquant/plan.h) asks of the backend that calibrated, on
// the unquantized weights it holds (the CUDA backend answers on the GPU): per projection, each
// input column's max |w|, and the W8A8 output error that candidate smoothing factors s would give
// on calibration rows x:
//   error     = sum ||W8A8(x diag(1/s), quant(W diag(s))) - x W^T||^2     (quant/w8a8.h's W8A8:
//   reference = sum ||x W^T||^2                                            int8 per token, per
// over every row and output column (fp64 sums; x W^T in fp32 arithmetic;   output channel)
// the bias left out: both sides add it exactly).
#pragma once

#include <span>
#include <vector>

#include "engine/backend/activation_observer.h"

namespace lmx {

struct ErrorSums {
  double error = 0.0;
  double reference = 0.0;
};

class SmoothingScorer {
 public:
  virtual ~SmoothingScorer() = default;
  // max over output rows o of |W[o, j]| for layer `layer`'s projection `slot`: [in].
  virtual std::vector<float> weight_column_max(int layer, LinearSlot slot) = 0;
  // The calibration rows x [rows, in] (fp32, host; copied) that the following error() calls
  // score. Throws lmx::Error for rows < 1 or x.size() != rows * in.
  virtual void set_rows(std::span<const float> x, int rows, int in) = 0;
  // The sums above for layer `layer`'s projection `slot` with smoothing s [in] on the rows set.
  // Throws lmx::Error when no rows are set or their width or s's size is not the projection's.
  virtual ErrorSums w8a8_error(int layer, LinearSlot slot, std::span<const float> s) = 0;
};

}  // namespace lmx
