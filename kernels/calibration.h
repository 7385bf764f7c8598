// Reductions for calibration (smoothquant/calibration.h, smoothquant/kv_calibration.h) and its
// alpha search (engine/backend/smoothing_scorer.h):
//   column_abs_max:     out[j] = max(out[j], max_t |x[t * ld + j]|)   x: [rows, cols], row stride
//                       ld >= cols; out: [cols] fp32, non-negative (zeros to start). NaN wins:
//                       a NaN in x (or already in out) leaves out[j] NaN; infinities are kept.
//   squared_error_sums: sums[0] += sum_i (y[i] - ref[i])^2, sums[1] += sum_i ref[i]^2
//                       y, ref: [n] fp32; sums: 2 doubles, each difference and square in fp64.
//   max_or_nan (CPU):   the largest of n non-negative values (a column_abs_max result); NaN if
//                       any is NaN.
//   convert (CUDA):     out[i] = To(in[i]) for n values, fp32 <-> T with one rounding (as the
//                       host's conversion of the same value).
// CPU: host memory. CUDA: T = float, __half or __nv_bfloat16, device memory (sums too), fp64
// sums in another order than the CPU's; no allocation, no synchronization.
#pragma once

#include <cstddef>

#include "kernels/stream.h"

namespace lmx::kernels::cpu {

void column_abs_max(const float* x, int rows, int cols, int ld, float* out);
void squared_error_sums(const float* y, const float* ref, size_t n, double* sums);
float max_or_nan(const float* v, size_t n);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

template <typename T>
void column_abs_max(const T* x, int rows, int cols, int ld, float* out, cudaStream_t stream);
void squared_error_sums(const float* y, const float* ref, size_t n, double* sums,
                        cudaStream_t stream);
template <typename From, typename To>
void convert(const From* in, To* out, size_t n, cudaStream_t stream);

}  // namespace lmx::kernels::cuda
