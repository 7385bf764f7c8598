// Normalization ops over rows of a [rows, cols] matrix.
//   rms_norm:   out = x / sqrt(mean(x^2) + eps) * weight
//   layer_norm: out = (x - mean) / sqrt(var + eps) * weight + bias   (biased variance)
// CPU: fp32, host memory. CUDA: T = float, __half or __nv_bfloat16 in device memory, fp32
// accumulation, one block per row, enqueued on `stream` (no allocation, no synchronization).
// x and out may alias.
#pragma once

#include "kernels/stream.h"

namespace lmx::kernels::cpu {

void rms_norm(const float* x, const float* weight, float* out, int rows, int cols, float eps);
void layer_norm(const float* x, const float* weight, const float* bias, float* out, int rows,
                int cols, float eps);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

template <typename T>
void rms_norm(const T* x, const T* weight, T* out, int rows, int cols, float eps,
              cudaStream_t stream);

}  // namespace lmx::kernels::cuda
