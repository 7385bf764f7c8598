// Normalization ops over rows of a [rows, cols] matrix.
//   rms_norm:   out = x / sqrt(mean(x^2) + eps) * weight
//   layer_norm: out = (x - mean) / sqrt(var + eps) * weight + bias   (biased variance)
// Fused with the residual add of a pre-norm decoder (one pass over the row instead of two):
//   add_rms_norm:   residual += x (skipped when x is null); out = rms_norm(residual)
//   add_layer_norm: residual += x (skipped when x is null); out = layer_norm(residual)
//   residual: [rows, cols] in/out; x: [rows, cols] or null; weight, bias: [cols]; out: [rows, cols].
// CPU: fp32, host memory. CUDA: T = float, __half or __nv_bfloat16 in device memory, fp32
// accumulation; the norm is computed from the updated residual after rounding to T, so the output
// equals a separate add then norm in T. One block per row (16-byte loads when cols and the pointers allow, the row cached in
// registers), enqueued on `stream` (no allocation, no synchronization). x and out may alias; out
// must not alias residual.
#pragma once

#include "kernels/stream.h"

namespace lmx::kernels::cpu {

void rms_norm(const float* x, const float* weight, float* out, int rows, int cols, float eps);
void layer_norm(const float* x, const float* weight, const float* bias, float* out, int rows,
                int cols, float eps);

void add_rms_norm(float* residual, const float* x, const float* weight, float* out, int rows,
                  int cols, float eps);
void add_layer_norm(float* residual, const float* x, const float* weight, const float* bias,
                    float* out, int rows, int cols, float eps);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

template <typename T>
void rms_norm(const T* x, const T* weight, T* out, int rows, int cols, float eps,
              cudaStream_t stream);
template <typename T>
void layer_norm(const T* x, const T* weight, const T* bias, T* out, int rows, int cols, float eps,
                cudaStream_t stream);

template <typename T>
void add_rms_norm(T* residual, const T* x, const T* weight, T* out, int rows, int cols, float eps,
                  cudaStream_t stream);
template <typename T>
void add_layer_norm(T* residual, const T* x, const T* weight, const T* bias, T* out, int rows,
                    int cols, float eps, cudaStream_t stream);

}  // namespace lmx::kernels::cuda
