#include "kernels/rotary.h"

#include <cmath>
#include <vector>

namespace lmx::kernels::cpu {

void rotary(float* x, int row_stride, const int32_t* positions, const float* inv_freq, int tokens,
            int heads, int head_dim, int rotary_dim) {
  const int half = rotary_dim / 2;
#pragma omp parallel for schedule(static) if (tokens > 8)
  for (int t = 0; t < tokens; ++t) {
    std::vector<float> cos_v(half), sin_v(half);
    for (int i = 0; i < half; ++i) {
      const float angle = float(positions[t]) * inv_freq[i];  // fp32 like the reference
      cos_v[i] = std::cos(angle);
      sin_v[i] = std::sin(angle);
    }
    for (int h = 0; h < heads; ++h) {
      float* v = x + size_t(t) * row_stride + size_t(h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cos_v[i] - b * sin_v[i];
        v[i + half] = b * cos_v[i] + a * sin_v[i];
      }
    }
  }
}

}  // namespace lmx::kernels::cpu
