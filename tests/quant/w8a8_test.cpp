// The W8A8 CPU reference (quant/w8a8.h) against double-precision formulas at odd sizes: per-token
// quantization (bytes and scales), exact int32 sums, the epilogue, explicit smoothing, and the
// whole linear against the float64 product of the dequantized operands.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "quant/int8.h"
#include "quant/w8a8.h"

namespace lmx::quant {
namespace {

struct Case {
  int rows, out, in;
};
const Case kCases[] = {{1, 1, 64}, {7, 67, 67}, {83, 7, 96}, {3, 129, 256}, {1, 5, 1}};

// [n] uniform in [-r, r]; row 0 of x is all zeros and (with 3+ rows) row 2 has one outlier 1e3x.
std::vector<float> random(size_t n, float r, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-r, r);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<float> activations(const Case& c, std::mt19937& rng) {
  std::vector<float> x = random(size_t(c.rows) * c.in, 2.0f, rng);
  std::fill_n(x.begin(), c.in, 0.0f);
  if (c.rows > 2) x[size_t(2) * c.in + c.in / 2] = 2e3f;
  return x;
}

TEST(W8A8, PerTokenQuantizationMatchesTheDoubleFormula) {
  std::mt19937 rng(3);
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " in " << c.in);
    const std::vector<float> x = activations(c, rng);
    const std::vector<float> inv = random(size_t(c.in), 1.0f, rng);
    for (const float* smooth : {static_cast<const float*>(nullptr), inv.data()}) {
      std::vector<int8_t> q(x.size());
      std::vector<float> s(static_cast<size_t>(c.rows));
      cpu::quantize_rows_int8(x.data(), smooth, c.rows, c.in, q.data(), s.data());
      for (int m = 0; m < c.rows; ++m) {
        const auto v = [&](int k) {
          return smooth ? x[size_t(m) * c.in + k] * smooth[k] : x[size_t(m) * c.in + k];
        };
        double amax = 0.0;
        for (int k = 0; k < c.in; ++k) amax = std::max(amax, std::fabs(double(v(k))));
        ASSERT_NEAR(s[m], amax / 127.0, 1e-7 * amax);
        for (int k = 0; k < c.in; ++k) {
          const int8_t got = q[size_t(m) * c.in + k];
          if (amax == 0.0) {
            ASSERT_EQ(got, 0);
            continue;
          }
          const double exact = double(v(k)) / double(s[m]);  // within 1/2 of the stored byte
          ASSERT_LE(std::fabs(exact - got), 0.5 + 1e-4) << "row " << m << " col " << k;
          ASSERT_LE(std::abs(int(got)), 127);
        }
        if (amax > 0.0) {  // the largest |value| maps to exactly +-127
          int top = 0;
          for (int k = 0; k < c.in; ++k) top = std::max(top, std::abs(int(q[size_t(m) * c.in + k])));
          ASSERT_EQ(top, 127);
        }
      }
    }
  }
}

TEST(W8A8, TiesRoundHalfToEven) {
  // Row max 127 -> scale 1: 2.5 -> 2, 3.5 -> 4, -0.5 -> 0, -1.5 -> -2.
  const std::vector<float> x = {127.0f, 2.5f, 3.5f, -0.5f, -1.5f};
  std::vector<int8_t> q(x.size());
  float s = 0.0f;
  cpu::quantize_rows_int8(x.data(), nullptr, 1, int(x.size()), q.data(), &s);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(std::vector<int>(q.begin(), q.end()), (std::vector<int>{127, 2, 4, 0, -2}));
}

TEST(W8A8, Int8GemmIsExactAtTheInt32Bound) {
  // Every product +-127 * +-127 at the largest input size: the sums reach +-(kW8A8MaxIn * 16129).
  const int in = int(kW8A8MaxIn);
  std::vector<int8_t> a(size_t(2) * in, 127), b(size_t(2) * in, 127);
  std::fill_n(a.begin() + in, in, int8_t(-127));
  std::vector<int32_t> acc(4);
  cpu::int8_gemm(a.data(), b.data(), acc.data(), 2, 2, in);
  const int64_t full = int64_t(in) * 127 * 127;
  EXPECT_EQ(acc[0], full);
  EXPECT_EQ(acc[2], -full);
  const std::vector<float> x(size_t(in) + 1, 1.0f);
  std::vector<float> y(1);
  const W8A8Weights w{b.data(), nullptr, nullptr, 1, in + 1};
  EXPECT_THROW(cpu::w8a8_linear(x.data(), w, y.data(), 1), Error);
}

TEST(W8A8, LinearMatchesTheDequantizedDoubleProduct) {
  std::mt19937 rng(11);
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "rows " << c.rows << " out " << c.out << " in " << c.in);
    const std::vector<float> x = activations(c, rng);
    const std::vector<float> w = random(size_t(c.out) * c.in, 0.5f, rng);
    const std::vector<float> bias = random(size_t(c.out), 1.0f, rng);
    const std::vector<float> inv = random(size_t(c.in), 1.0f, rng);
    std::vector<int8_t> wq(w.size());
    std::vector<float> ws(static_cast<size_t>(c.out));
    cpu::quantize_int8("test", w.data(), c.out, c.in, c.in, wq.data(), ws.data());
    for (const float* smooth : {static_cast<const float*>(nullptr), inv.data()}) {
      std::vector<float> y(size_t(c.rows) * c.out);
      const W8A8Weights view{wq.data(), ws.data(), bias.data(), c.out, c.in};
      cpu::w8a8_linear(x.data(), view, y.data(), c.rows, smooth);
      // The reference: the same per-token bytes (tested above), dequantized, in float64.
      std::vector<int8_t> xq(x.size());
      std::vector<float> xs(static_cast<size_t>(c.rows));
      cpu::quantize_rows_int8(x.data(), smooth, c.rows, c.in, xq.data(), xs.data());
      for (int m = 0; m < c.rows; ++m)
        for (int o = 0; o < c.out; ++o) {
          double ref = bias[o], scale = 0.0;
          for (int k = 0; k < c.in; ++k) {
            const double xv = double(xq[size_t(m) * c.in + k]) * xs[m];
            const double wv = double(wq[size_t(o) * c.in + k]) * ws[o];
            ref += xv * wv;
            scale += std::fabs(xv * wv);
          }
          // The int32 sum is exact; two fp32 products and a sum round: a few ulps of the terms.
          ASSERT_NEAR(y[size_t(m) * c.out + o], ref, 4e-7 * scale + 1e-6 * std::fabs(bias[o]) + 1e-30)
              << "row " << m << " out " << o;
        }
      // And the provable bound against the unquantized operands: each quantized value is within
      // half a step (xs[m] / 2, ws[o] / 2) of the original, so each product is within
      // |x| ws / 2 + |w| xs / 2 + xs ws / 4 of x w (plus fp32 rounding).
      for (int m = 0; m < c.rows; ++m)
        for (int o = 0; o < c.out; ++o) {
          double exact = bias[o], bound = 1e-5 * std::fabs(bias[o]) + 1e-30;
          for (int k = 0; k < c.in; ++k) {
            const double xv = double(x[size_t(m) * c.in + k]) * (smooth ? smooth[k] : 1.0f);
            const double wv = w[size_t(o) * c.in + k];
            exact += xv * wv;
            bound += (std::fabs(xv) * ws[o] + std::fabs(wv) * xs[m] + 0.5 * xs[m] * ws[o]) * 0.5 * (1 + 1e-5);
          }
          ASSERT_NEAR(y[size_t(m) * c.out + o], exact, bound) << "row " << m << " out " << o;
        }
    }
  }
}

}  // namespace
}  // namespace lmx::quant
