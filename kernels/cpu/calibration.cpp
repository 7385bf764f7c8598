#include "kernels/calibration.h"

#include <cmath>

namespace lmx::kernels::cpu {

void column_abs_max(const float* x, int rows, int cols, int ld, float* out) {
  for (int t = 0; t < rows; ++t)
    for (int j = 0; j < cols; ++j) {
      const float v = std::fabs(x[size_t(t) * size_t(ld) + size_t(j)]);
      if (!std::isnan(out[j]) && (std::isnan(v) || v > out[j])) out[j] = v;
    }
}

void squared_error_sums(const float* y, const float* ref, size_t n, double* sums) {
  double error = 0.0, reference = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double(y[i]) - double(ref[i]);
    error += d * d;
    reference += double(ref[i]) * double(ref[i]);
  }
  sums[0] += error;
  sums[1] += reference;
}

float max_or_nan(const float* v, size_t n) {
  float out = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(v[i])) return v[i];
    if (v[i] > out) out = v[i];
  }
  return out;
}

}  // namespace lmx::kernels::cpu
