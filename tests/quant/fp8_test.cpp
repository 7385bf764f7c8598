// The fp8 (E4M3 W8A8) CPU reference (quant/fp8.h) against independent formulas: per-row scales
// and codes (the row's largest |value| maps to 448, ties to even through encode_e4m3, all-zero
// rows, non-finite weights refused), and the linear against the float64 product of the decoded
// operands and against the unquantized product within E4M3's error bound; grouped weight scales
// (block-scaled fp8 checkpoints) against the float64 formula.
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "kernels/kv_dtype.h"
#include "quant/fp8.h"

namespace lmx::quant {
namespace {

using kernels::cpu::decode_e4m3;
using kernels::cpu::encode_e4m3;

std::vector<float> random(size_t n, float r, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-r, r);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(Fp8, RowQuantizationMatchesTheFormula) {
  std::mt19937 rng(5);
  const int rows = 9, in = 67;
  std::vector<float> a = random(size_t(rows) * in, 3.0f, rng);
  std::fill_n(a.begin() + 2 * in, in, 0.0f);  // an all-zero row
  a[size_t(4) * in + 5] = -1e4f;               // an outlier: the rest of its row gets coarse
  std::vector<uint8_t> codes(a.size());
  std::vector<float> scales(static_cast<size_t>(rows));
  cpu::quantize_rows_e4m3("w", a.data(), rows, in, codes.data(), scales.data());
  for (int r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int k = 0; k < in; ++k) amax = std::max(amax, std::fabs(a[size_t(r) * in + k]));
    EXPECT_EQ(scales[size_t(r)], amax / 448.0f) << r;
    for (int k = 0; k < in; ++k) {
      const size_t i = size_t(r) * in + k;
      const uint8_t want = amax > 0 ? encode_e4m3(a[i] / scales[size_t(r)]) : 0;
      ASSERT_EQ(codes[i], want) << r << "," << k;
      if (std::fabs(a[i]) == amax && amax > 0) {
        EXPECT_EQ(std::fabs(decode_e4m3(codes[i])), 448.0f);
      }
    }
  }
  EXPECT_EQ(scales[2], 0.0f);
  EXPECT_EQ(codes[size_t(4) * in + 5], encode_e4m3(-448.0f));
  a[17] = std::nanf("");
  try {
    cpu::quantize_rows_e4m3("layer 0 qkv", a.data(), rows, in, codes.data(), scales.data());
    ADD_FAILURE() << "a NaN weight was quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0 qkv"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[0, 17]"), std::string::npos) << e.what();
  }
}

TEST(Fp8, LinearIsTheProductOfTheDecodedOperands) {
  std::mt19937 rng(6);
  for (auto [rows, out, in] : {std::tuple{1, 1, 16}, {5, 33, 67}, {17, 8, 256}}) {
    const std::vector<float> w = random(size_t(out) * in, 0.1f, rng);
    std::vector<float> x = random(size_t(rows) * in, 2.0f, rng);
    std::fill_n(x.begin(), in, 0.0f);  // token 0 all zero: its outputs are the bias
    const std::vector<float> bias = random(size_t(out), 0.5f, rng);
    std::vector<uint8_t> wq(w.size()), xq(x.size());
    std::vector<float> ws(static_cast<size_t>(out)), xs(static_cast<size_t>(rows));
    cpu::quantize_rows_e4m3("w", w.data(), out, in, wq.data(), ws.data());
    cpu::quantize_rows_e4m3("x", x.data(), rows, in, xq.data(), xs.data());
    std::vector<float> y(size_t(rows) * out);
    cpu::fp8_linear(x.data(), {wq.data(), ws.data(), bias.data(), out, in}, y.data(), rows);
    for (int m = 0; m < rows; ++m)
      for (int o = 0; o < out; ++o) {
        double dq = 0.0, exact = 0.0, mag = 0.0;
        for (int k = 0; k < in; ++k) {
          const double xv = decode_e4m3(xq[size_t(m) * in + k]) * double(xs[size_t(m)]);
          const double wv = decode_e4m3(wq[size_t(o) * in + k]) * double(ws[size_t(o)]);
          dq += xv * wv;
          exact += double(x[size_t(m) * in + k]) * double(w[size_t(o) * in + k]);
          mag += std::fabs(double(x[size_t(m) * in + k]) * double(w[size_t(o) * in + k]));
        }
        const double got = y[size_t(m) * out + o] - double(bias[size_t(o)]);
        // fp32 sums of exact products: a few ulps of the magnitude.
        EXPECT_NEAR(got, dq, 1e-6 * (mag + 1e-30) * in) << m << "," << o;
        // Each operand within half an E4M3 step (2^-4 relative) of the original: the product
        // within about 2 * 2^-4 of each term's magnitude.
        EXPECT_NEAR(got, exact, 0.13 * mag + 1e-12) << m << "," << o;
        if (m == 0) {
          EXPECT_EQ(y[size_t(o)], bias[size_t(o)]);
        }
      }
  }
}

// Grouped weight scales (a block-scaled fp8 checkpoint: ws [out, in / group]): each group's fp32
// sum scaled by its own scale, against the float64 formula; group 0 and group == in are the
// per-row linear, bit for bit; equal scales in every group agree with the per-row linear to the
// sums' rounding; a group that does not divide in is refused.
TEST(Fp8, GroupedScalesScaleEachGroupsSum) {
  std::mt19937 rng(7);
  for (auto [rows, out, in, group] :
       {std::tuple{1, 3, 256, 128}, {7, 33, 384, 128}, {5, 8, 96, 32}, {2, 4, 16, 16}}) {
    SCOPED_TRACE(std::to_string(in) + " / " + std::to_string(group));
    const int groups = in / group;
    const std::vector<float> x = random(size_t(rows) * in, 2.0f, rng);
    const std::vector<float> bias = random(size_t(out), 0.5f, rng);
    std::vector<uint8_t> wq(size_t(out) * in), xq(x.size());
    for (uint8_t& c : wq) c = encode_e4m3(random(1, 448.0f, rng)[0]);
    std::vector<float> ws = random(size_t(out) * groups, 1.0f, rng), xs(static_cast<size_t>(rows));
    for (float& s : ws) s = std::fabs(s) + 1e-3f;
    cpu::quantize_rows_e4m3("x", x.data(), rows, in, xq.data(), xs.data());
    std::vector<float> y(size_t(rows) * out);
    cpu::fp8_linear(x.data(), {wq.data(), ws.data(), bias.data(), out, in, group}, y.data(), rows);
    for (int m = 0; m < rows; ++m)
      for (int o = 0; o < out; ++o) {
        double want = 0.0, mag = 0.0;
        for (int k = 0; k < in; ++k) {
          const double term = double(decode_e4m3(xq[size_t(m) * in + k])) * xs[size_t(m)] *
                              decode_e4m3(wq[size_t(o) * in + k]) *
                              ws[size_t(o) * groups + k / group];
          want += term;
          mag += std::fabs(term);
        }
        // fp32 sums of exact products, scaled and added in fp32: a few ulps of the magnitude.
        EXPECT_NEAR(y[size_t(m) * out + o] - double(bias[size_t(o)]), want, 1e-6 * mag * in)
            << m << "," << o;
      }
    // One scale a row: group 0 and group == in are the per-row linear; equal group scales agree
    // with it to rounding.
    std::vector<float> row_scales(static_cast<size_t>(out)), uniform;
    for (int o = 0; o < out; ++o) {
      row_scales[size_t(o)] = ws[size_t(o) * groups];
      uniform.insert(uniform.end(), size_t(groups), row_scales[size_t(o)]);
    }
    std::vector<float> per_row(y.size()), whole_group(y.size()), equal(y.size());
    cpu::fp8_linear(x.data(), {wq.data(), row_scales.data(), bias.data(), out, in}, per_row.data(),
                    rows);
    cpu::fp8_linear(x.data(), {wq.data(), row_scales.data(), bias.data(), out, in, in},
                    whole_group.data(), rows);
    cpu::fp8_linear(x.data(), {wq.data(), uniform.data(), bias.data(), out, in, group},
                    equal.data(), rows);
    EXPECT_EQ(whole_group, per_row);
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(equal[i], per_row[i], 1e-5 * (std::fabs(per_row[i]) + 1.0)) << i;
  }
  const std::vector<uint8_t> wq(2 * 96);
  const std::vector<float> ws(2 * 3, 1.0f), x(96, 1.0f);
  std::vector<float> y(2);
  try {
    cpu::fp8_linear(x.data(), {wq.data(), ws.data(), nullptr, 2, 96, 64}, y.data(), 1);
    ADD_FAILURE() << "a group of 64 over 96 columns was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("group of 64 input columns does not divide 96"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lmx::quant
