// CPU reference ops against straightforward double-precision formulas, at odd and larger sizes.
// Tolerance: fp32 accumulation over <= 4096 terms of O(1) values stays within 1e-4 relative.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/linear.h"
#include "kernels/norm.h"
#include "kernels/rotary.h"

namespace lmx {
namespace {

namespace k = kernels::cpu;

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

double rel_error(const std::vector<float>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class Sizes : public ::testing::TestWithParam<std::pair<int, int>> {};  // tokens, hidden

TEST_P(Sizes, RmsNormAndLayerNorm) {
  const auto [T, H] = GetParam();
  const auto x = randn(size_t(T) * H, 1), w = randn(H, 2), b = randn(H, 3);
  std::vector<float> out(x.size(), NAN);
  std::vector<double> ref(x.size());
  k::rms_norm(x.data(), w.data(), out.data(), T, H, 1e-6f);
  for (int t = 0; t < T; ++t) {
    double ss = 0;
    for (int c = 0; c < H; ++c) ss += double(x[t * H + c]) * x[t * H + c];
    const double inv = 1.0 / std::sqrt(ss / H + 1e-6);
    for (int c = 0; c < H; ++c) ref[t * H + c] = w[c] * x[t * H + c] * inv;
  }
  EXPECT_LT(rel_error(out, ref), 1e-5);

  std::fill(out.begin(), out.end(), NAN);
  k::layer_norm(x.data(), w.data(), b.data(), out.data(), T, H, 1e-5f);
  for (int t = 0; t < T; ++t) {
    double mean = 0, var = 0;
    for (int c = 0; c < H; ++c) mean += x[t * H + c];
    mean /= H;
    for (int c = 0; c < H; ++c) var += (x[t * H + c] - mean) * (x[t * H + c] - mean);
    const double inv = 1.0 / std::sqrt(var / H + 1e-5);
    for (int c = 0; c < H; ++c) ref[t * H + c] = (x[t * H + c] - mean) * inv * w[c] + b[c];
  }
  EXPECT_LT(rel_error(out, ref), 1e-5);
}

// y = x W^T (+ b) through the kernels' view of a projection: with its bias, and without
// (without_bias() of the same view: the bias must not be added).
TEST_P(Sizes, LinearWithAndWithoutBias) {
  const auto [T, H] = GetParam();
  const int N = 37;
  const auto x = randn(size_t(T) * H, 4), w = randn(size_t(N) * H, 5), b = randn(N, 6);
  const kernels::LinearWeights<float> biased{w.data(), b.data(), N, H};
  for (const bool with_bias : {true, false}) {
    std::vector<float> y(size_t(T) * N, NAN);
    k::linear(x.data(), with_bias ? biased : biased.without_bias(), y.data(), T);
    std::vector<double> ref(y.size());
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n) {
        double s = with_bias ? b[n] : 0.0;
        for (int c = 0; c < H; ++c) s += double(x[t * H + c]) * w[n * H + c];
        ref[t * N + n] = s;
      }
    EXPECT_LT(rel_error(y, ref), 1e-5) << "bias " << with_bias;
  }
}

TEST_P(Sizes, GatedActivations) {
  const auto [T, I] = GetParam();
  const auto in = randn(size_t(T) * 2 * I, 7, 3.0f);
  std::vector<float> out(size_t(T) * I, NAN);
  std::vector<double> ref(out.size());
  using Kind = kernels::ActivationKind;
  const auto f = [](Kind kind, double x) {
    switch (kind) {
      case Kind::Silu: return x / (1 + std::exp(-x));
      case Kind::GeluTanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
      case Kind::GeluExact: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
      case Kind::Relu: return std::max(0.0, x);
    }
    return 0.0;
  };
  for (Kind kind : {Kind::Silu, Kind::GeluTanh, Kind::GeluExact, Kind::Relu}) {
    k::gated_act(kind, in.data(), out.data(), T, I);
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < I; ++i) ref[t * I + i] = f(kind, in[t * 2 * I + i]) * in[t * 2 * I + I + i];
    EXPECT_LT(rel_error(out, ref), 1e-5) << int(kind);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Sizes,
                         ::testing::Values(std::pair{1, 67}, std::pair{7, 64}, std::pair{83, 128},
                                           std::pair{3, 4096}));

TEST(Rotary, PartialRotaryLeavesTailAndMatchesFormula) {
  const int T = 7, heads = 3, D = 10, R = 6, stride = heads * D + 5;
  auto x = randn(size_t(T) * stride, 8);
  const auto orig = x;
  const std::vector<float> inv = {1.0f, 0.1f, 0.01f};
  std::vector<int32_t> pos = {0, 1, 2, 5, 17, 100, 3};
  k::rotary(x.data(), stride, pos.data(), inv.data(), T, heads, D, R);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < D; ++i) {
        const size_t o = size_t(t) * stride + h * D;
        double expected = orig[o + i];
        if (i < R) {
          const int j = i % (R / 2);
          const double a = pos[t] * double(inv[j]);
          expected = i < R / 2 ? orig[o + i] * std::cos(a) - orig[o + i + R / 2] * std::sin(a)
                               : orig[o + i] * std::cos(a) + orig[o + i - R / 2] * std::sin(a);
        }
        EXPECT_NEAR(x[o + i], expected, 2e-5) << t << " " << h << " " << i;
      }
  for (int t = 0; t < T; ++t)  // columns past the heads are untouched
    for (int c = heads * D; c < stride; ++c) EXPECT_EQ(x[t * stride + c], orig[t * stride + c]);
}

// Paged attention with scattered blocks equals dense causal (optionally windowed) attention.
TEST(PagedAttention, MatchesDenseReferenceWithGqaAndWindows) {
  const int heads = 6, kv_heads = 2, D = 5, bs = 4;
  const std::vector<int> lengths = {1, 7, 13};
  for (int window : {0, 3}) {
    const int max_blocks = 4;
    kernels::PagedKvLayout L{bs, kv_heads, D, max_blocks};
    const int num_blocks = 12;
    std::vector<float> kc(size_t(num_blocks) * bs * kv_heads * D, NAN), vc = kc;
    // Blocks handed out in a scrambled order.
    std::vector<int32_t> tables = {9, 0, 0, 0, 3, 7, 0, 0, 11, 1, 5, 2};
    std::vector<int32_t> seq, pos;
    for (size_t s = 0; s < lengths.size(); ++s)
      for (int p = 0; p < lengths[s]; ++p) seq.push_back(int32_t(s)), pos.push_back(p);
    const int T = int(seq.size()), kv_stride = kv_heads * D;
    const auto kk = randn(size_t(T) * kv_stride, 9), vv = randn(size_t(T) * kv_stride, 10);
    const auto q = randn(size_t(T) * heads * D, 11);
    k::write_kv(kk.data(), vv.data(), kv_stride, kc.data(), vc.data(), tables.data(), seq.data(),
                pos.data(), T, L);
    std::vector<float> out(size_t(T) * heads * D, NAN);
    const float scale = 1.0f / std::sqrt(float(D));
    k::paged_attention(q.data(), heads * D, kc.data(), vc.data(), tables.data(), seq.data(),
                       pos.data(), out.data(), T, heads, scale, nullptr, window, L);

    std::vector<double> ref(out.size());
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < heads; ++h) {
        const int kvh = h / (heads / kv_heads);
        std::vector<double> w;
        std::vector<int> keys;
        for (int u = 0; u < T; ++u) {  // keys: same sequence, earlier or equal position
          if (seq[u] != seq[t] || pos[u] > pos[t]) continue;
          if (window > 0 && pos[t] - pos[u] >= window) continue;
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(q[(t * heads + h) * D + d]) * kk[u * kv_stride + kvh * D + d];
          w.push_back(dot * scale);
          keys.push_back(u);
        }
        const double m = *std::max_element(w.begin(), w.end());
        double z = 0;
        for (double& x : w) z += x = std::exp(x - m);
        for (int d = 0; d < D; ++d) {
          double acc = 0;
          for (size_t i = 0; i < keys.size(); ++i) acc += w[i] / z * vv[keys[i] * kv_stride + kvh * D + d];
          ref[(t * heads + h) * D + d] = acc;
        }
      }
    EXPECT_LT(rel_error(out, ref), 1e-5) << "window " << window;
  }
}

// Bloom's ALiBi slopes (Hugging Face build_alibi_tensor) for n heads, in double: p = the largest
// power of two <= n; slopes[i] = base^(i + 1) for i < p, base = 2^(-2^-(log2(p) - 3)); heads
// past p take the odd powers of extra_base = 2^(-2^-(log2(2p) - 3)).
std::vector<double> bloom_alibi_slopes(int n) {
  const int p = 1 << int(std::floor(std::log2(double(n))));
  const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(double(p)) - 3)));
  const double extra_base = std::pow(2.0, -std::pow(2.0, -(std::log2(2.0 * p) - 3)));
  std::vector<double> slopes;
  for (int i = 0; i < p; ++i) slopes.push_back(std::pow(base, i + 1));
  for (int j = 0; j < n - p; ++j) slopes.push_back(std::pow(extra_base, 2 * j + 1));
  return slopes;
}

// ALiBi: the reference with slopes equals dense attention whose scores get Bloom's own bias,
// slope * (key position) (softmax-equivalent to the reference's slope * (p - pos)), computed in
// double, for 6 heads (not a power of two: two slopes from the extra base), MHA and GQA, with and
// without a window. Tolerance 1e-5 as above (fp32 over <= 13 keys).
TEST(PagedAttention, AlibiMatchesBloomBiasInDouble) {
  const int heads = 6, D = 7, bs = 4;
  const std::vector<double> slopes = bloom_alibi_slopes(heads);
  ASSERT_NEAR(slopes[0], 0.25, 1e-15);  // 4 heads' base 2^-2, then 2^-1 and 2^-3 for heads 5, 6
  ASSERT_NEAR(slopes[4], 0.5, 1e-15);
  ASSERT_NEAR(slopes[5], 0.125, 1e-15);
  const std::vector<float> slopes_f(slopes.begin(), slopes.end());  // exact: powers of two
  const std::vector<int> lengths = {1, 7, 13};
  for (int kv_heads : {6, 2})
    for (int window : {0, 5}) {
      kernels::PagedKvLayout L{bs, kv_heads, D, 4};
      std::vector<float> kc(size_t(12) * bs * kv_heads * D, NAN), vc = kc;
      std::vector<int32_t> tables = {9, 0, 0, 0, 3, 7, 0, 0, 11, 1, 5, 2};
      std::vector<int32_t> seq, pos;
      for (size_t s = 0; s < lengths.size(); ++s)
        for (int p = 0; p < lengths[s]; ++p) seq.push_back(int32_t(s)), pos.push_back(p);
      const int T = int(seq.size()), kv_stride = kv_heads * D;
      // Larger q so the dot products do not drown the bias (both matter in the softmax).
      const auto kk = randn(size_t(T) * kv_stride, 12), vv = randn(size_t(T) * kv_stride, 13);
      const auto q = randn(size_t(T) * heads * D, 14, 2.0f);
      k::write_kv(kk.data(), vv.data(), kv_stride, kc.data(), vc.data(), tables.data(), seq.data(),
                  pos.data(), T, L);
      std::vector<float> out(size_t(T) * heads * D, NAN);
      const float scale = 1.0f / std::sqrt(float(D));
      k::paged_attention(q.data(), heads * D, kc.data(), vc.data(), tables.data(), seq.data(),
                         pos.data(), out.data(), T, heads, scale, slopes_f.data(), window, L);

      std::vector<double> ref(out.size());
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < heads; ++h) {
          const int kvh = h / (heads / kv_heads);
          std::vector<double> w;
          std::vector<int> keys;
          for (int u = 0; u < T; ++u) {
            if (seq[u] != seq[t] || pos[u] > pos[t]) continue;
            if (window > 0 && pos[t] - pos[u] >= window) continue;
            double dot = 0;
            for (int d = 0; d < D; ++d)
              dot += double(q[(t * heads + h) * D + d]) * kk[u * kv_stride + kvh * D + d];
            w.push_back(dot * scale + slopes[size_t(h)] * pos[u]);  // Bloom: slope * key position
            keys.push_back(u);
          }
          const double m = *std::max_element(w.begin(), w.end());
          double z = 0;
          for (double& x : w) z += x = std::exp(x - m);
          for (int d = 0; d < D; ++d) {
            double acc = 0;
            for (size_t i = 0; i < keys.size(); ++i)
              acc += w[i] / z * vv[keys[i] * kv_stride + kvh * D + d];
            ref[(t * heads + h) * D + d] = acc;
          }
        }
      EXPECT_LT(rel_error(out, ref), 1e-5) << "kv_heads " << kv_heads << ", window " << window;

      // The bias changes the result (it is not silently dropped): without it, far from ref.
      std::vector<float> plain(out.size(), NAN);
      k::paged_attention(q.data(), heads * D, kc.data(), vc.data(), tables.data(), seq.data(),
                         pos.data(), plain.data(), T, heads, scale, nullptr, window, L);
      EXPECT_GT(rel_error(plain, ref), 1e-2) << "kv_heads " << kv_heads << ", window " << window;
    }
}

}  // namespace
}  // namespace lmx
