// The dynamic_int8 format and the W8A16 CPU linear against double-precision formulas
// (quant/int8.h), at odd sizes, per channel and grouped, with all-zero rows and rows dominated by
// one huge value.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "kernels/int8_layout.h"
#include "quant/int8.h"

namespace lmx::quant {
namespace {

struct Case {
  int out, in, group;
};

// Random weights [out, in] in [-1, 1], with row 0 all zeros and (when out > 2) row 2 holding one
// value 1e4 times the others: the per-channel scale is then set by that value alone.
std::vector<float> weights(const Case& c, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> w(size_t(c.out) * c.in);
  for (float& v : w) v = u(rng);
  std::fill_n(w.begin(), c.in, 0.0f);
  if (c.out > 2) w[size_t(2) * c.in + c.in / 3] = -1e4f;
  return w;
}

struct Quantized {
  std::vector<int8_t> values;
  std::vector<float> scales;
  W8A16Weights view(const Case& c, const float* bias = nullptr) const {
    return {values.data(), scales.data(), bias, c.out, c.in, c.group};
  }
};

Quantized quantize(const Case& c, const std::vector<float>& w) {
  Quantized q{std::vector<int8_t>(w.size()), std::vector<float>(size_t(c.out) * (c.in / c.group))};
  cpu::quantize_int8("test", w.data(), c.out, c.in, c.group, q.values.data(), q.scales.data());
  return q;
}

const Case kCases[] = {{1, 64, 64},  {7, 64, 64}, {67, 64, 64}, {1, 67, 67},   {7, 67, 67},
                       {67, 67, 67}, {7, 64, 16}, {67, 64, 32}, {5, 256, 128}, {3, 96, 32}};

TEST(Int8Quantize, ScalesAndValuesMatchTheDoubleFormula) {
  std::mt19937 rng(7);
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << "out " << c.out << " in " << c.in << " group " << c.group);
    const std::vector<float> w = weights(c, rng);
    const Quantized q = quantize(c, w);
    const int groups = c.in / c.group;
    for (int o = 0; o < c.out; ++o) {
      for (int g = 0; g < groups; ++g) {
        double amax = 0.0;
        for (int k = g * c.group; k < (g + 1) * c.group; ++k)
          amax = std::max(amax, std::fabs(double(w[size_t(o) * c.in + k])));
        const double s = q.scales[size_t(o) * groups + g];
        EXPECT_NEAR(s, amax / 127.0, 1e-7 * amax / 127.0) << "scale [" << o << ", " << g << "]";
        for (int k = g * c.group; k < (g + 1) * c.group; ++k) {
          const double x = w[size_t(o) * c.in + k];
          const int got = q.values[size_t(o) * c.in + k];
          if (s == 0.0) {
            EXPECT_EQ(got, 0);
            continue;
          }
          const double r = x / s;
          const double want = std::clamp(std::nearbyint(r), -127.0, 127.0);  // half to even
          // Float and double quotients may round apart only next to a tie.
          if (std::fabs(std::fabs(r - std::trunc(r)) - 0.5) > 1e-4) {
            EXPECT_EQ(got, int(want)) << "value [" << o << ", " << k << "] = " << x;
          }
          EXPECT_LE(std::fabs(got * s - x), 0.5 * s * (1 + 1e-5)) << "[" << o << ", " << k << "]";
          EXPECT_GE(got, -127);
        }
      }
    }
    // The all-zero row: zero scales and values; the huge value maps to -127 exactly.
    for (int g = 0; g < groups; ++g) EXPECT_EQ(q.scales[size_t(g)], 0.0f);
    if (c.out > 2) {
      EXPECT_EQ(q.values[size_t(2) * c.in + c.in / 3], -127);
    }
  }
}

TEST(Int8Quantize, RoundsHalfToEven) {
  // Row max 127 -> scale 1, so w / s is w itself: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2.
  const std::vector<float> w = {127.0f, 0.5f, 1.5f, 2.5f, -2.5f, -0.5f, 126.5f, -126.5f};
  std::vector<int8_t> q(w.size());
  float s = 0.0f;
  cpu::quantize_int8("ties", w.data(), 1, int64_t(w.size()), int64_t(w.size()), q.data(), &s);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(std::vector<int>(q.begin(), q.end()),
            (std::vector<int>{127, 0, 2, 2, -2, 0, 126, -126}));
}

TEST(W8A16Linear, MatchesTheDoubleFormula) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (const Case& c : kCases) {
    for (const int rows : {1, 7, 83}) {
      SCOPED_TRACE(testing::Message() << "rows " << rows << " out " << c.out << " in " << c.in
                                      << " group " << c.group);
      const std::vector<float> w = weights(c, rng);
      const Quantized q = quantize(c, w);
      std::vector<float> x(size_t(rows) * c.in), bias(size_t(c.out)), y(size_t(rows) * c.out);
      for (float& v : x) v = u(rng);
      for (float& v : bias) v = u(rng);
      cpu::w8a16_linear(x.data(), q.view(c, bias.data()), y.data(), rows);
      const int groups = c.in / c.group;
      for (int m = 0; m < rows; ++m) {
        for (int o = 0; o < c.out; ++o) {
          double want = bias[size_t(o)], magnitude = std::fabs(want);
          for (int k = 0; k < c.in; ++k) {
            const double t = double(x[size_t(m) * c.in + k]) * q.values[size_t(o) * c.in + k] *
                             q.scales[size_t(o) * groups + k / c.group];
            want += t;
            magnitude += std::fabs(t);
          }
          // fp32 accumulation of `in` terms: at most ~in rounding errors of 2^-24 each.
          const double tol = (c.in + 2) * std::ldexp(1.0, -24) * magnitude;
          EXPECT_NEAR(y[size_t(m) * c.out + o], want, tol) << "y [" << m << ", " << o << "]";
        }
        EXPECT_EQ(y[size_t(m) * c.out], bias[0]) << "all-zero row: the bias alone";
      }
    }
  }
}

TEST(W8A16Linear, NoBiasAndDequantizeAgree) {
  const Case c{7, 64, 32};
  std::mt19937 rng(3);
  const std::vector<float> w = weights(c, rng);
  const Quantized q = quantize(c, w);
  std::vector<float> deq(w.size());
  cpu::dequantize_int8(q.view(c), deq.data());
  std::vector<float> x(size_t(c.in), 0.0f), y(size_t(c.out));
  for (int k = 0; k < c.in; ++k) {  // a one-hot x picks out a column of dequant(W)
    std::fill(x.begin(), x.end(), 0.0f);
    x[size_t(k)] = 1.0f;
    cpu::w8a16_linear(x.data(), q.view(c), y.data(), 1);
    for (int o = 0; o < c.out; ++o) EXPECT_EQ(y[size_t(o)], deq[size_t(o) * c.in + k]);
  }
}

TEST(Int8Quantize, RefusesBadGroupsAndNonFiniteWeights) {
  std::vector<float> w(size_t(3) * 67, 1.0f);
  std::vector<int8_t> q(w.size());
  std::vector<float> s(3 * 67);
  try {
    cpu::quantize_int8("model.layers.0.mlp.down_proj", w.data(), 3, 67, 32, q.data(), s.data());
    FAIL() << "a group of 32 does not divide 67";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.down_proj"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("group size 32 does not divide its 67"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cpu::quantize_int8("w", w.data(), 3, 67, 0, q.data(), s.data()), Error);
  w[5] = std::nanf("");
  EXPECT_THROW(cpu::quantize_int8("w", w.data(), 3, 67, 67, q.data(), s.data()), Error);
  w[5] = INFINITY;
  EXPECT_THROW(cpu::quantize_int8("w", w.data(), 3, 67, 67, q.data(), s.data()), Error);
}

// The CUDA backend's order of int8 rows (kernels/int8_layout.h): each complete group of 16
// columns in the tensor cores' fragment order (a thread's k 2t, 2t + 1, 2t + 8, 2t + 9 at stored
// 4t .. 4t + 3), a partial group at the end of a row in column order; every row a permutation,
// undone by from_int8_layout.
TEST(Int8Layout, StoresEachGroupOf16InFragmentOrder) {
  const int order[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
  for (int ld : {16, 40, 64, 86, 4096}) {
    std::vector<int> seen(size_t(ld), 0);
    for (int k = 0; k < ld; ++k) {
      const int at = kernels::int8_position(k, ld);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, ld);
      ++seen[size_t(at)];
      if (k >= ld - ld % 16)
        EXPECT_EQ(at, k) << "ld " << ld << " k " << k;
      else
        EXPECT_EQ(order[at % 16] + at / 16 * 16, k) << "ld " << ld << " k " << k;
    }
    for (int at = 0; at < ld; ++at) EXPECT_EQ(seen[size_t(at)], 1) << "ld " << ld;
    std::vector<int8_t> rows(size_t(3) * ld), stored(rows.size()), back(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = int8_t(i * 7 % 255 - 127);
    kernels::to_int8_layout(rows.data(), stored.data(), 3, ld);
    kernels::from_int8_layout(stored.data(), back.data(), 3, ld);
    EXPECT_EQ(back, rows) << "ld " << ld;
    EXPECT_EQ(stored[size_t(ld) + 2], rows[size_t(ld) + 8]) << "ld " << ld;  // row 1, k 8
  }
}

}  // namespace
}  // namespace lmx::quant
