#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "quant/int8.h"

namespace lmx::quant {

void check_int8_shape(const char* what, int64_t out, int64_t in, int64_t group) {
  if (out <= 0 || in <= 0) throw_error("{}: cannot quantize a weight of shape [{}, {}]", what, out, in);
  if (group <= 0 || in % group != 0)
    throw_error("{}: quantization group size {} does not divide its {} input columns "
                "(weight [{}, {}]); choose a group size that divides every projection's input size",
                what, group, in, out, in);
}

namespace cpu {

void quantize_int8(const char* what, const float* w, int64_t out, int64_t in, int64_t group,
                   int8_t* values, float* scales) {
  check_int8_shape(what, out, in, group);
  const int64_t groups = in / group;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* src = w + o * in + g * group;
      int8_t* dst = values + o * in + g * group;
      float amax = 0.0f;
      for (int64_t k = 0; k < group; ++k) {
        if (!std::isfinite(src[k]))
          throw_error("{}: weight [{}, {}] is {}; int8 quantization needs finite weights", what, o,
                      g * group + k, src[k]);
        amax = std::max(amax, std::fabs(src[k]));
      }
      const float s = amax / 127.0f;
      scales[o * groups + g] = s;
      for (int64_t k = 0; k < group; ++k) {
        // s = 0 only for an all-zero group: every value is 0.
        const float r = s > 0.0f ? std::nearbyint(src[k] / s) : 0.0f;
        dst[k] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
      }
    }
  }
}

void dequantize_int8(const W8A16Weights& w, float* out) {
  const int groups = w.groups();
  for (int o = 0; o < w.out; ++o)
    for (int k = 0; k < w.in; ++k)
      out[int64_t(o) * w.in + k] =
          float(w.values[int64_t(o) * w.in + k]) * w.scales[int64_t(o) * groups + k / w.group];
}

}  // namespace cpu
}  // namespace lmx::quant
