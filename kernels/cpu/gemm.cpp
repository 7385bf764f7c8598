#include "kernels/gemm.h"

#if LMX_BUILTIN_BLAS
#include "kernels/cpu/builtin_sgemm.h"
#else
#include <cblas.h>
#endif

namespace lmx::kernels::cpu {

void linear(const float* x, const float* w, const float* bias, float* y, int M, int N, int K) {
  if (M == 0 || N == 0) return;
#if LMX_BUILTIN_BLAS
  builtin_sgemm_nt(x, w, y, M, N, K);
#else
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);
#endif
  if (!bias) return;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) y[size_t(m) * N + n] += bias[n];
}

}  // namespace lmx::kernels::cpu
