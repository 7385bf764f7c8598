#include "smoothquant/smoothing.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "quant/int8.h"
#include "quant/w8a8.h"

namespace lmx::smoothquant {
namespace {
constexpr float kFloor = 1e-5f;  // keeps channels that never fire (or all-zero columns) finite
}

std::vector<float> weight_column_max(const std::vector<Matrix>& ws) {
  if (ws.empty()) throw_error("weight_column_max: no weights");
  std::vector<float> m(size_t(ws[0].in), 0.0f);
  for (const Matrix& w : ws) {
    if (w.in != ws[0].in) throw_error("weight_column_max: inputs {} and {} differ", w.in, ws[0].in);
    for (int64_t o = 0; o < w.out; ++o)
      for (int64_t j = 0; j < w.in; ++j)
        m[size_t(j)] = std::max(m[size_t(j)], std::fabs(w.data[o * w.in + j]));
  }
  return m;
}

std::vector<float> smoothing_factors(const std::vector<float>& act_max,
                                     const std::vector<float>& weight_max, double alpha) {
  if (act_max.size() != weight_max.size())
    throw_error("smoothing factors: {} activation maxima for {} weight columns", act_max.size(),
                weight_max.size());
  if (!(alpha >= 0.0 && alpha <= 1.0)) throw_error("smoothing alpha {} is not in [0, 1]", alpha);
  std::vector<float> s(act_max.size());
  for (size_t j = 0; j < s.size(); ++j) {
    const double a = std::max(act_max[j], kFloor), w = std::max(weight_max[j], kFloor);
    s[j] = std::max(float(std::pow(a, alpha) / std::pow(w, 1.0 - alpha)), kFloor);
  }
  return s;
}

double w8a8_relative_error(const float* x, int64_t rows, const std::vector<Matrix>& ws,
                           const std::vector<float>& s) {
  double err = 0.0, ref = 0.0;
  std::vector<float> inv(s.size());
  for (size_t j = 0; j < s.size(); ++j) inv[j] = 1.0f / s[j];
  for (const Matrix& w : ws) {
    std::vector<float> smoothed(size_t(w.out * w.in));
    for (int64_t o = 0; o < w.out; ++o)
      for (int64_t j = 0; j < w.in; ++j)
        smoothed[size_t(o * w.in + j)] = w.data[o * w.in + j] * s[size_t(j)];
    std::vector<int8_t> q(smoothed.size());
    std::vector<float> scales(static_cast<size_t>(w.out));
    quant::cpu::quantize_int8("alpha search", smoothed.data(), w.out, w.in, w.in, q.data(),
                              scales.data());
    std::vector<float> y(size_t(rows * w.out));
    quant::cpu::w8a8_linear(x, {q.data(), scales.data(), nullptr, int(w.out), int(w.in)},
                            y.data(), int(rows), inv.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < w.out; ++o) {
        double exact = 0.0;
        for (int64_t j = 0; j < w.in; ++j) exact += double(x[r * w.in + j]) * w.data[o * w.in + j];
        const double d = double(y[size_t(r * w.out + o)]) - exact;
        err += d * d;
        ref += exact * exact;
      }
  }
  return ref > 0.0 ? err / ref : err;
}

std::vector<double> alpha_grid() { return {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}; }

}  // namespace lmx::smoothquant
