#include "engine/backend/cpu_smoothing_scorer.h"

#include "engine/core/error.h"
#include "kernels/calibration.h"
#include "kernels/gemm.h"
#include "quant/int8.h"
#include "quant/w8a8.h"

namespace lmx {

std::vector<float> CpuSmoothingScorer::weight_column_max(int layer, LinearSlot slot) {
  const kernels::LinearWeights<float> w = projection_(layer, slot);
  std::vector<float> out(size_t(w.in), 0.0f);
  kernels::cpu::column_abs_max(w.weight, w.out, w.in, w.in, out.data());
  return out;
}

void CpuSmoothingScorer::set_rows(std::span<const float> x, int rows, int in) {
  rows_.set(x.size(), rows, in);
  x_.assign(x.begin(), x.end());
}

ErrorSums CpuSmoothingScorer::w8a8_error(int layer, LinearSlot slot, std::span<const float> s) {
  const kernels::LinearWeights<float> w = projection_(layer, slot);
  rows_.check_score(layer, slot, w.in, s.size());
  const int M = rows_.rows(), N = w.out, K = w.in;
  const size_t out = size_t(M) * size_t(N);
  if (rows_.reference_stale(layer, slot)) {
    ref_.resize(out);
    kernels::cpu::linear(x_.data(), w.without_bias(), ref_.data(), M);
  }
  std::vector<float> smoothed(size_t(N) * size_t(K));
  std::vector<float> inv(s.size());
  for (size_t j = 0; j < size_t(K); ++j) inv[j] = 1.0f / s[j];
  for (size_t o = 0; o < size_t(N); ++o)
    for (size_t j = 0; j < size_t(K); ++j)
      smoothed[o * size_t(K) + j] = w.weight[o * size_t(K) + j] * s[j];
  std::vector<int8_t> q(smoothed.size());
  std::vector<float> scales(static_cast<size_t>(N));
  std::vector<float> y(out);
  quant::cpu::quantize_int8("alpha search", smoothed.data(), N, K, K, q.data(), scales.data());
  quant::cpu::w8a8_linear(x_.data(), {q.data(), scales.data(), nullptr, N, K}, y.data(), M,
                          inv.data());
  double sums[2] = {0.0, 0.0};
  kernels::cpu::squared_error_sums(y.data(), ref_.data(), out, sums);
  return {sums[0], sums[1]};
}

}  // namespace lmx
