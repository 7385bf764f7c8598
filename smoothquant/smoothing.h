// SmoothQuant's smoothing factors and the per-layer alpha search (docs/quantization.md):
//   s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)      (both maxima clamped to >= 1e-5, s too)
// where max|W_j| is over every output row of every projection reading the input X (qkv, or
// gate/up, or both under a shared block norm). Then X W^T = (X diag(1/s)) (W diag(s))^T, and
// W8A8 quantizes the smoothed operands.
#pragma once

#include <cstdint>
#include <vector>

namespace lmx::smoothquant {

// A weight [out, in] fp32 row-major, host memory.
struct Matrix {
  const float* data = nullptr;
  int64_t out = 0, in = 0;
};

// max_o |w[o, j]| over the rows of every weight in `ws` (all with the same `in`): [in].
std::vector<float> weight_column_max(const std::vector<Matrix>& ws);

// s [in] as above.
std::vector<float> smoothing_factors(const std::vector<float>& act_max,
                                     const std::vector<float>& weight_max, double alpha);

// The relative output error of W8A8 on calibration rows x [rows, in] for the weights `ws` smoothed
// by s:  sum_w ||w8a8(x / s, quant(w diag(s))) - x w^T||^2 / sum_w ||x w^T||^2  (fp64 sums; bias
// left out: it is added exactly by both).
double w8a8_relative_error(const float* x, int64_t rows, const std::vector<Matrix>& ws,
                           const std::vector<float>& s);

// The alpha grid searched when option.smoothquant_alpha is unset: 0.3, 0.4, ..., 0.9.
std::vector<double> alpha_grid();

}  // namespace lmx::smoothquant
