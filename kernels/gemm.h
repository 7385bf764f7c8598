// Linear layer: y[M, N] = x[M, K] · w[N, K]^T (+ bias[N]), w in nn.Linear's [out, in] layout.
// CPU: fp32, host memory, through BLAS (OpenBLAS's multi-threaded sgemm).
#pragma once

namespace lmx::kernels::cpu {

void linear(const float* x, const float* w, const float* bias, float* y, int M, int N, int K);

}  // namespace lmx::kernels::cpu
