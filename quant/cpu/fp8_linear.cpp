#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "engine/core/error.h"
#include "kernels/kv_dtype.h"
#include "quant/fp8.h"

namespace lmx::quant::cpu {
namespace {

// The value of every E4M3 code (NaN codes never occur: inputs are finite and saturate).
const std::array<float, 256>& e4m3_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[size_t(c)] = kernels::cpu::decode_e4m3(uint8_t(c));
    return t;
  }();
  return table;
}

}  // namespace

void quantize_rows_e4m3(const char* what, const float* a, int64_t rows, int64_t in,
                        uint8_t* codes, float* scales, bool check_finite) {
  if (rows < 0 || in <= 0) throw_error("{}: cannot quantize [{}, {}] to fp8", what, rows, in);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = a + r * in;
    float amax = 0.0f;
    for (int64_t k = 0; k < in; ++k) amax = std::max(amax, std::fabs(row[k]));
    const float s = amax / kE4m3Max;
    scales[r] = s;
    uint8_t* q = codes + r * in;
    for (int64_t k = 0; k < in; ++k) q[k] = s > 0.0f ? kernels::cpu::encode_e4m3(row[k] / s) : 0;
  }
  if (!check_finite) return;
  for (int64_t i = 0; i < rows * in; ++i)
    if (!std::isfinite(a[i]))
      throw_error("{}: element [{}, {}] is {} (fp8 quantizes finite weights)", what, i / in,
                  i % in, a[i]);
}

void fp8_linear(const float* x, const Fp8Weights& w, float* y, int rows) {
  if (w.out <= 0 || w.in <= 0 || rows < 0)
    throw_error("fp8_linear: sizes must be positive (out {}, in {}, rows {})", w.out, w.in, rows);
  std::vector<uint8_t> xq(size_t(rows) * size_t(w.in));
  std::vector<float> xs(static_cast<size_t>(rows));
  const bool grouped = w.group > 0 && w.group < w.in;
  if (grouped && w.in % w.group != 0)
    throw_error("fp8_linear: a scale group of {} input columns does not divide {}", w.group, w.in);
  quantize_rows_e4m3("activations", x, rows, w.in, xq.data(), xs.data(), false);
  const std::array<float, 256>& val = e4m3_values();
  const int group = grouped ? w.group : w.in, groups = w.in / group;
#pragma omp parallel for collapse(2) schedule(static)
  for (int m = 0; m < rows; ++m)
    for (int o = 0; o < w.out; ++o) {
      const uint8_t* a = xq.data() + int64_t(m) * w.in;
      const uint8_t* b = w.codes + int64_t(o) * w.in;
      const float* ws = w.scales + int64_t(o) * groups;
      const float bias = w.bias ? w.bias[o] : 0.0f;
      float* out = y + int64_t(m) * w.out + o;
      if (!grouped) {  // one scale a row: both scales on the whole sum
        float acc = 0.0f;
        for (int k = 0; k < w.in; ++k) acc += val[a[k]] * val[b[k]];
        *out = acc * xs[size_t(m)] * ws[0] + bias;
        continue;
      }
      float sum = 0.0f;
      for (int g = 0; g < groups; ++g) {
        float acc = 0.0f;
        for (int k = g * group; k < (g + 1) * group; ++k) acc += val[a[k]] * val[b[k]];
        sum += ws[g] * acc;
      }
      *out = xs[size_t(m)] * sum + bias;
    }
}

}  // namespace lmx::quant::cpu
