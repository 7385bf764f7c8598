#include "kernels/row_dots.h"

#include <cstddef>
#include <cstdint>

#include "kernels/kv_dtype.h"

namespace lmx::kernels::cpu {

void row_dots(const LinearWeights<float>& w, const float* v, float* out) {
  for (int n = 0; n < w.out; ++n) {
    const size_t row = size_t(n) * size_t(w.in);
    const float* scales = w.grouped() ? w.q_scale + size_t(n) * size_t(w.in / w.group) : nullptr;
    double sum = 0.0;
    for (int k = 0; k < w.in; ++k) {
      float weight = !w.quantized() ? w.weight[row + k]
                     : w.e4m3       ? decode_e4m3(uint8_t(w.q[row + k]))
                                    : float(w.q[row + k]);
      if (scales) weight *= scales[k / w.group];
      sum += double(weight) * (v ? v[k] : 1.0f);
    }
    out[n] = float(w.quantized() && !scales ? sum * w.q_scale[n] : sum);
  }
}

}  // namespace lmx::kernels::cpu
