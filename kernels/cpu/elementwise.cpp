#include "kernels/elementwise.h"

#include <cstddef>
#include <cstring>

namespace lmx::kernels::cpu {

void bias_add(const float* x, const float* bias, const float* residual, float* out, int tokens,
              int cols) {
  for (int t = 0; t < tokens; ++t)
    for (int c = 0; c < cols; ++c) {
      const size_t i = size_t(t) * cols + c;
      float v = x[i];
      if (bias) v += bias[c];
      if (residual) v += residual[i];
      out[i] = v;
    }
}

void gather_rows(const float* x, const int32_t* rows, float* out, int n, int cols) {
  for (int i = 0; i < n; ++i)
    std::memcpy(out + size_t(i) * cols, x + size_t(rows[i]) * cols, size_t(cols) * sizeof(float));
}

void scale_columns(float* w, const float* scale, int rows, int cols) {
  for (int n = 0; n < rows; ++n)
    for (int k = 0; k < cols; ++k) w[size_t(n) * cols + k] *= scale[k];
}

}  // namespace lmx::kernels::cpu
