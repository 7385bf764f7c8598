// Normalization ops over rows of a [rows, cols] matrix.
//   rms_norm:   out = x / sqrt(mean(x^2) + eps) * weight
//   layer_norm: out = (x - mean) / sqrt(var + eps) * weight + bias   (biased variance)
// CPU: fp32, host memory. x and out may alias.
#pragma once

namespace lmx::kernels::cpu {

void rms_norm(const float* x, const float* weight, float* out, int rows, int cols, float eps);
void layer_norm(const float* x, const float* weight, const float* bias, float* out, int rows,
                int cols, float eps);

}  // namespace lmx::kernels::cpu
