#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/core/error.h"
#include "quant/w8a8.h"

namespace lmx::quant::cpu {

void quantize_rows_int8(const float* x, const float* inv_smooth, int rows, int in, int8_t* xq,
                        float* xs) {
#pragma omp parallel for schedule(static)
  for (int m = 0; m < rows; ++m) {
    const float* xr = x + int64_t(m) * in;
    const auto value = [&](int k) { return inv_smooth ? xr[k] * inv_smooth[k] : xr[k]; };
    float amax = 0.0f;
    for (int k = 0; k < in; ++k) amax = std::max(amax, std::fabs(value(k)));
    const float s = amax / 127.0f;
    xs[m] = s;
    int8_t* q = xq + int64_t(m) * in;
    for (int k = 0; k < in; ++k) {
      const float r = s > 0.0f ? std::nearbyint(value(k) / s) : 0.0f;
      q[k] = int8_t(std::clamp(r, -127.0f, 127.0f));
    }
  }
}

void int8_gemm(const int8_t* a, const int8_t* b, int32_t* acc, int rows, int out, int in) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int m = 0; m < rows; ++m) {
    for (int o = 0; o < out; ++o) {
      const int8_t* ar = a + int64_t(m) * in;
      const int8_t* br = b + int64_t(o) * in;
      int32_t sum = 0;
      for (int k = 0; k < in; ++k) sum += int32_t(ar[k]) * int32_t(br[k]);
      acc[int64_t(m) * out + o] = sum;
    }
  }
}

void scale_epilogue(const int32_t* acc, const float* row_scale, const float* col_scale,
                    const float* bias, float* y, int rows, int out) {
#pragma omp parallel for schedule(static)
  for (int m = 0; m < rows; ++m)
    for (int o = 0; o < out; ++o) {
      const int64_t i = int64_t(m) * out + o;
      y[i] = float(acc[i]) * row_scale[m] * col_scale[o] + (bias ? bias[o] : 0.0f);
    }
}

void w8a8_linear(const float* x, const W8A8Weights& w, float* y, int rows,
                 const float* inv_smooth) {
  if (w.out <= 0 || w.in <= 0 || rows < 0)
    throw_error("w8a8_linear: sizes must be positive (out {}, in {}, rows {})", w.out, w.in, rows);
  if (w.in > kW8A8MaxIn)
    throw_error("w8a8_linear: {} input columns would overflow the int32 sums (at most {})", w.in,
                kW8A8MaxIn);
  std::vector<int8_t> xq(size_t(rows) * size_t(w.in));
  std::vector<float> xs(static_cast<size_t>(rows));
  std::vector<int32_t> acc(size_t(rows) * size_t(w.out));
  quantize_rows_int8(x, inv_smooth, rows, w.in, xq.data(), xs.data());
  int8_gemm(xq.data(), w.values, acc.data(), rows, w.out, w.in);
  scale_epilogue(acc.data(), xs.data(), w.scales, w.bias, y, rows, w.out);
}

}  // namespace lmx::quant::cpu
