// Portable y[M, N] = x[M, K] · w[N, K]^T in fp32 (OpenMP over rows of w, dot products with fp32
// accumulation). Only for machines without OpenBLAS (the GPU machine's image), where the CPU
// backend serves as the small-model reference; CI and users get OpenBLAS.
#pragma once

namespace lmx::kernels::cpu {

void builtin_sgemm_nt(const float* x, const float* w, float* y, int M, int N, int K);

}  // namespace lmx::kernels::cpu
