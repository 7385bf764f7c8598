// Dot products of a projection's weight rows with one vector:
//   out[n] = sum_k W[n, k] v[k]    W: [w.out, w.in] as the projection's kernels multiply it (the
//                                   weight, or q[n, k] times q_scale[n], or its group's scale
//                                   when w.grouped(): int8 values, or E4M3 codes when w.e4m3);
//                                   v: [w.in], or null for all ones (the row
//                                   sums); out: [w.out] fp32. w.bias is not used.
// Used at load to fold a LayerNorm into the projection that reads it (InputNorm, kernels/gemm.h):
// the bias b + W beta, and the row sums of the folded (and quantized) weight.
// CPU: fp32, host. CUDA: T = float, __half or __nv_bfloat16 (v in T), device memory, fp32
// accumulation (k summed in another order than the CPU's); no allocation, no synchronization.
#pragma once

#include "kernels/linear.h"
#include "kernels/stream.h"

namespace lmx::kernels::cpu {

void row_dots(const LinearWeights<float>& w, const float* v, float* out);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

template <typename T>
void row_dots(const LinearWeights<T>& w, const T* v, float* out, cudaStream_t stream);

}  // namespace lmx::kernels::cuda
