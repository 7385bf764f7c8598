#include "kernels/norm.h"

#include <cmath>

namespace lmx::kernels::cpu {

void rms_norm(const float* x, const float* weight, float* out, int rows, int cols, float eps) {
#pragma omp parallel for schedule(static) if (rows > 8)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(r) * cols;
    float* o = out + size_t(r) * cols;
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += xr[c] * xr[c];
    const float inv = 1.0f / std::sqrt(sum / float(cols) + eps);
    for (int c = 0; c < cols; ++c) o[c] = weight[c] * (xr[c] * inv);
  }
}

void layer_norm(const float* x, const float* weight, const float* bias, float* out, int rows,
                int cols, float eps) {
#pragma omp parallel for schedule(static) if (rows > 8)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(r) * cols;
    float* o = out + size_t(r) * cols;
    float mean = 0.0f;
    for (int c = 0; c < cols; ++c) mean += xr[c];
    mean /= float(cols);
    float var = 0.0f;
    for (int c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    const float inv = 1.0f / std::sqrt(var / float(cols) + eps);
    for (int c = 0; c < cols; ++c) o[c] = (xr[c] - mean) * inv * weight[c] + bias[c];
  }
}

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cpu {

void add_rms_norm(float* residual, const float* x, const float* weight, float* out, int rows,
                  int cols, float eps) {
  if (x)
    for (size_t i = 0; i < size_t(rows) * cols; ++i) residual[i] += x[i];
  rms_norm(residual, weight, out, rows, cols, eps);
}

void add_layer_norm(float* residual, const float* x, const float* weight, const float* bias,
                    float* out, int rows, int cols, float eps) {
  if (x)
    for (size_t i = 0; i < size_t(rows) * cols; ++i) residual[i] += x[i];
  layer_norm(residual, weight, bias, out, rows, cols, eps);
}

}  // namespace lmx::kernels::cpu
