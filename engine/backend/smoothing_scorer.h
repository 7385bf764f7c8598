// What smoothquant's alpha search (smoothquant/plan.h) asks of the backend that calibrated, on
// the unquantized weights it holds (the CUDA backend answers on the GPU): per projection, each
// input column's max |w|, and the W8A8 output error that candidate smoothing factors s would give
// on calibration rows x:
//   error     = sum ||W8A8(x diag(1/s), quant(W diag(s))) - x W^T||^2     (quant/w8a8.h's W8A8:
//   reference = sum ||x W^T||^2                                            int8 per token, per
// over every row and output column (fp64 sums; x W^T in fp32 arithmetic;   output channel)
// the bias left out: both sides add it exactly).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "engine/backend/activation_observer.h"
#include "engine/model/model_weights.h"

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

// Layer L's projection `slot`, in any backend's buffers.
template <typename Buffer>
const Linear<Buffer>& slot_linear(const LayerWeights<Buffer>& L, LinearSlot slot) {
  switch (slot) {
    case LinearSlot::Qkv:
      return L.qkv;
    case LinearSlot::O:
      return L.o;
    case LinearSlot::Up:
      return L.up;
    case LinearSlot::Down:
      break;
  }
  return L.down;
}

// What every SmoothingScorer keeps of its calls, checked alike: the rows set (count, width) and
// which projection's reference x W^T was last computed on them.
class ScorerRows {
 public:
  // A set_rows() call of `values` values: throws lmx::Error unless they are rows x in.
  void set(size_t values, int rows, int in);
  // A w8a8_error() call for layer `layer`'s projection `slot` of `in` inputs with `factors`
  // smoothing factors: throws lmx::Error when no rows are set or a width differs.
  void check_score(int layer, LinearSlot slot, int in, size_t factors) const;
  // Whether x W^T of (layer, slot) on the rows set still has to be computed; afterwards it counts
  // as computed.
  bool reference_stale(int layer, LinearSlot slot);
  int rows() const { return rows_; }

 private:
  int rows_ = 0, in_ = 0;
  long set_ = 0;  // set() calls so far
  int ref_layer_ = -1;
  LinearSlot ref_slot_ = LinearSlot::Qkv;
  long ref_set_ = -1;
};

}  // namespace lmx
