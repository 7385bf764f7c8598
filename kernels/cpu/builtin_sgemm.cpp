#include "kernels/cpu/builtin_sgemm.h"

#include <cstddef>

namespace lmx::kernels::cpu {

void builtin_sgemm_nt(const float* x, const float* w, float* y, int M, int N, int K) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* wr = w + size_t(n) * K;
    for (int m = 0; m < M; ++m) {
      const float* xr = x + size_t(m) * K;
      float acc = 0.0f;
      for (int k = 0; k < K; ++k) acc += xr[k] * wr[k];
      y[size_t(m) * N + n] = acc;
    }
  }
}

}  // namespace lmx::kernels::cpu
