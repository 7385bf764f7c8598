// Small row-wise ops around the GEMMs.
//   bias_add:    out[t, c] = x[t, c] + bias[c] (+ residual[t, c])    x, residual, out: [tokens, cols]
//                bias: [cols] or null; residual: null or [tokens, cols]; out may alias x or residual.
//   gather_rows: out[i, :] = x[rows[i], :]    x: [*, cols]; rows: [n] int32; out: [n, cols]
//                (the LM head's logit rows: the last token of each sequence).
//   scale_columns: w[n, k] *= scale[k]    w: [rows, cols] in place; scale: [cols]
//                (folds a norm's weight into the projection that follows it, once at load).
// CPU: fp32, host. CUDA: T = float, __half or __nv_bfloat16, device memory, rows a device array,
// fp32 arithmetic with one rounding; no allocation, no synchronization.
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace lmx::kernels::cpu {

void bias_add(const float* x, const float* bias, const float* residual, float* out, int tokens,
              int cols);
void gather_rows(const float* x, const int32_t* rows, float* out, int n, int cols);
void scale_columns(float* w, const float* scale, int rows, int cols);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

template <typename T>
void bias_add(const T* x, const T* bias, const T* residual, T* out, int tokens, int cols,
              cudaStream_t stream);
template <typename T>
void gather_rows(const T* x, const int32_t* rows, T* out, int n, int cols, cudaStream_t stream);
template <typename T>
void scale_columns(T* w, const T* scale, int rows, int cols, cudaStream_t stream);

}  // namespace lmx::kernels::cuda
