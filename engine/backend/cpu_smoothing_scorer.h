// smoothquant's alpha search on the CPU reference (engine/backend/smoothing_scorer.h) over the
// fp32 weights a CPU backend holds: quant/w8a8.h's W8A8 of the candidate smoothing against x W^T
// from the CPU GEMM (fp32), computed once per projection and set of rows.
#pragma once

#include <functional>
#include <vector>

#include "engine/backend/smoothing_scorer.h"
#include "kernels/linear.h"

namespace lmx {

class CpuSmoothingScorer final : public SmoothingScorer {
 public:
  // The weight [out, in] fp32 of layer `layer`'s projection `slot` (its bias is not used).
  using Projection = std::function<kernels::LinearWeights<float>(int layer, LinearSlot slot)>;
  explicit CpuSmoothingScorer(Projection projection) : projection_(std::move(projection)) {}

  std::vector<float> weight_column_max(int layer, LinearSlot slot) override;
  void set_rows(std::span<const float> x, int rows, int in) override;
  ErrorSums w8a8_error(int layer, LinearSlot slot, std::span<const float> s) override;

 private:
  Projection projection_;
  ScorerRows rows_;
  std::vector<float> x_;    // the rows set [rows, in]
  std::vector<float> ref_;  // x W^T of the projection rows_ last computed it for
};

}  // namespace lmx
