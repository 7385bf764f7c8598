// SmoothQuant's smoothing factors (docs/quantization.md):
//   s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)      (both maxima clamped to >= 1e-5, s too)
// where max|W_j| is over every output row of every projection reading the input X (qkv, or
// gate/up, or both under a shared block norm). Then X W^T = (X diag(1/s)) (W diag(s))^T, and
// W8A8 quantizes the smoothed operands. The alpha search scores candidates on the calibration
// backend (engine/backend/smoothing_scorer.h).
#pragma once

#include <vector>

namespace lmx::smoothquant {

// s [in] as above.
std::vector<float> smoothing_factors(const std::vector<float>& act_max,
                                     const std::vector<float>& weight_max, double alpha);

// The alpha grid searched when option.smoothquant_alpha is unset: 0.3, 0.4, ..., 0.9.
std::vector<double> alpha_grid();

}  // namespace lmx::smoothquant
