#include "quant/int8.h"

namespace lmx::quant::cpu {

void w8a16_linear(const float* x, const W8A16Weights& w, float* y, int rows) {
  check_int8_shape("w8a16_linear", w.out, w.in, w.group);
  const int out = w.out, in = w.in, group = w.group, groups = w.groups();
  // One (row, channel) pair a task: [rows * out] independent dot products of `in` terms.
#pragma omp parallel for collapse(2) schedule(static)
  for (int m = 0; m < rows; ++m) {
    for (int o = 0; o < out; ++o) {
      const float* xr = x + int64_t(m) * in;
      const int8_t* q = w.values + int64_t(o) * in;
      const float* s = w.scales + int64_t(o) * groups;
      float acc = 0.0f;
      for (int g = 0; g < groups; ++g) {
        float dot = 0.0f;  // sum over the group of x * q: the scale is common to it
        for (int k = g * group; k < (g + 1) * group; ++k) dot += xr[k] * float(q[k]);
        acc += dot * s[g];
      }
      y[int64_t(m) * out + o] = acc + (w.bias ? w.bias[o] : 0.0f);
    }
  }
}

}  // namespace lmx::quant::cpu
