#include "kernels/gemm.h"

#include <cblas.h>

namespace lmx::kernels::cpu {

void linear(const float* x, const float* w, const float* bias, float* y, int M, int N, int K) {
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);
  if (!bias) return;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) y[size_t(m) * N + n] += bias[n];
}

}  // namespace lmx::kernels::cpu
