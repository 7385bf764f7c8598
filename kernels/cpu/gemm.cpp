#include "kernels/gemm.h"

#if LMX_BUILTIN_BLAS
#include "kernels/cpu/builtin_sgemm.h"
#else
#include <cblas.h>
#endif

namespace lmx::kernels::cpu {

void linear(const float* x, const LinearWeights<float>& lw, float* y, int M) {
  const float* w = lw.weight;
  const float* bias = lw.bias;
  const int N = lw.out, K = lw.in;
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
