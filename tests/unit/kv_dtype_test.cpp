// FP8 E4M3 (OCP E4M3FN) encode / decode of the KV cache (kernels/kv_dtype.h) against the format's
// definition, and the CPU cache writes that store through it. Exactness is the point: the
// CUDA fp8 kernels are compared bit for bit with this reference (PTX cvt.rn.satfinite.e4m3x2.f32).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention.h"
#include "kernels/kv_dtype.h"
#include "kernels/rope_kv.h"

namespace lmx {
namespace {

namespace k = kernels::cpu;
using kernels::KvDtype;

// The value of a code from the format's definition: bias 7, exponent field 0 = subnormals
// m / 8 * 2^-6, 0x7F / 0xFF NaN, no infinities.
double formula(int code) {
  const int s = code >> 7, e = (code >> 3) & 0xF, m = code & 7;
  if (e == 0xF && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag =
      e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return s ? -mag : mag;
}

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

TEST(KvDtype, NamesAndSizes) {
  EXPECT_EQ(kernels::kv_dtype_name(KvDtype::model), "model");
  EXPECT_EQ(kernels::kv_dtype_name(KvDtype::fp8_e4m3), "fp8_e4m3");
  EXPECT_EQ(kernels::kv_value_bytes(KvDtype::model, 2), 2);
  EXPECT_EQ(kernels::kv_value_bytes(KvDtype::fp8_e4m3, 2), 1);
}

TEST(E4m3, EveryCodeDecodesToTheFormula) {
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE(c);
    const float v = k::decode_e4m3(uint8_t(c));
    const double f = formula(c);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(v));
    } else {
      EXPECT_EQ(double(v), f);
      EXPECT_EQ(std::signbit(v), bool(c & 0x80));  // 0x80 is -0.0
    }
  }
  EXPECT_EQ(k::decode_e4m3(0x7E), 448.0f);
  EXPECT_EQ(k::decode_e4m3(0xFE), -448.0f);
  EXPECT_EQ(k::decode_e4m3(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(k::decode_e4m3(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(k::decode_e4m3(0x38), 1.0f);
}

TEST(E4m3, EncodeOfDecodeIsIdentityForEveryNonNanCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(int(k::encode_e4m3(k::decode_e4m3(uint8_t(c)))), c) << c;
  }
}

// Midpoints between neighbouring codes (exact in fp32: 4 mantissa bits) tie to the even code;
// a hair above goes up, a hair below goes down. Covers the subnormals, the subnormal -> normal
// step (7/8 * 2^-6 .. 2^-6), binade steps (mantissa 7 -> next exponent) and both signs.
TEST(E4m3, MidpointsTieToEvenAndNeighboursRoundToNearest) {
  for (int c = 0; c < 0x7E; ++c) {  // c and c + 1 both finite, non-negative
    SCOPED_TRACE(c);
    const float lo = k::decode_e4m3(uint8_t(c)), hi = k::decode_e4m3(uint8_t(c + 1));
    const float mid = 0.5f * (lo + hi);
    ASSERT_EQ(double(mid), 0.5 * (double(lo) + double(hi)));  // exact
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(int(k::encode_e4m3(mid)), even);
    EXPECT_EQ(int(k::encode_e4m3(-mid)), even | 0x80);
    EXPECT_EQ(int(k::encode_e4m3(std::nextafter(mid, 1e9f))), c + 1);
    EXPECT_EQ(int(k::encode_e4m3(std::nextafter(mid, 0.0f))), c);
    EXPECT_EQ(int(k::encode_e4m3(-std::nextafter(mid, 1e9f))), (c + 1) | 0x80);
    EXPECT_EQ(int(k::encode_e4m3(-std::nextafter(mid, 0.0f))), c | 0x80);
  }
  // Named cases: 1 + 1/16 ties down to 1.0 (0x38, even); 1 + 3/16 ties up to 1.25 (0x3A).
  EXPECT_EQ(k::encode_e4m3(1.0625f), 0x38);
  EXPECT_EQ(k::encode_e4m3(1.1875f), 0x3A);
  // 1.9375 = halfway between 1.875 (0x3F, odd) and 2.0 (0x40): up into the next binade.
  EXPECT_EQ(k::encode_e4m3(1.9375f), 0x40);
  // 15/16 * 2^-6, halfway between the largest subnormal 7 * 2^-9 (odd) and 2^-6: up to 0x08.
  EXPECT_EQ(k::encode_e4m3(std::ldexp(15.0f, -10)), 0x08);
}

TEST(E4m3, SaturatesToMaxFinite) {
  for (float x : {448.0f, 449.0f, 463.99f, 464.0f, 465.0f, 480.0f, 512.0f, 1e9f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(x);
    EXPECT_EQ(k::encode_e4m3(x), 0x7E);
    EXPECT_EQ(k::encode_e4m3(-x), 0xFE);
    EXPECT_EQ(k::round_to_e4m3(x), 448.0f);
    EXPECT_EQ(k::round_to_e4m3(-x), -448.0f);
  }
  // Below the 416..448 midpoint (432) it still rounds to nearest.
  EXPECT_EQ(k::encode_e4m3(431.0f), 0x7D);  // 416
  EXPECT_EQ(k::encode_e4m3(433.0f), 0x7E);
}

TEST(E4m3, TinyValuesRoundToZeroOrTheSmallestSubnormal) {
  const float min_sub = std::ldexp(1.0f, -9);
  EXPECT_EQ(k::encode_e4m3(0.0f), 0x00);
  EXPECT_EQ(k::encode_e4m3(-0.0f), 0x80);
  EXPECT_EQ(k::encode_e4m3(std::ldexp(1.0f, -10)), 0x00);  // exactly half: ties to 0 (even)
  EXPECT_EQ(k::encode_e4m3(-std::ldexp(1.0f, -10)), 0x80);
  EXPECT_EQ(k::encode_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(k::encode_e4m3(std::nextafter(std::ldexp(1.0f, -10), 0.0f)), 0x00);
  EXPECT_EQ(k::encode_e4m3(std::ldexp(3.0f, -11)), 0x01);  // 0.75 * 2^-9
  EXPECT_EQ(k::encode_e4m3(min_sub), 0x01);
  EXPECT_EQ(k::encode_e4m3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 * 2^-9 ties to 2 (even)
  EXPECT_EQ(k::encode_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(k::encode_e4m3(-std::numeric_limits<float>::denorm_min()), 0x80);
  EXPECT_EQ(k::encode_e4m3(1e-30f), 0x00);
}

TEST(E4m3, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(k::encode_e4m3(nan), 0x7F);
  EXPECT_EQ(k::encode_e4m3(-nan), 0x7F);  // the PTX conversion drops a NaN's sign (H100)
  EXPECT_TRUE(std::isnan(k::round_to_e4m3(nan)));
}

// Random values over the whole range: the code is the nearest (ties even) finite E4M3 value by
// brute force over all codes, saturating beyond 448.
TEST(E4m3, RandomValuesRoundToTheNearestCode) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> exp_d(-14.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::exp2(exp_d(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
    int best = -1;
    double best_err = INFINITY;
    for (int c = 0; c < 256; ++c) {
      if ((c & 0x7F) == 0x7F || (c & 0x80) != (std::signbit(x) ? 0x80 : 0)) continue;
      const double err = std::fabs(formula(c) - double(x));
      if (err < best_err || (err == best_err && (c & 1) == 0)) best = c, best_err = err;
    }
    EXPECT_EQ(int(k::encode_e4m3(x)), best) << x << " bits " << bits(x);
  }
}

// A paged layout with scrambled blocks and values spanning subnormals to beyond 448.
struct CacheCase {
  int kv_heads = 2, head_dim = 5, bs = 4, heads = 4, num_blocks = 8;
  std::vector<int32_t> tables = {5, 1, 7, 2, 0, 3};  // 2 sequences x 3 blocks
  std::vector<int32_t> seq = {0, 0, 1, 1, 1, 0, 1}, pos = {0, 5, 2, 9, 3, 11, 4};
  int tokens() const { return int(seq.size()); }
  kernels::PagedKvLayout layout() const { return {bs, kv_heads, head_dim, 3}; }
  size_t cache_size() const { return size_t(num_blocks) * bs * kv_heads * head_dim; }
  size_t slot(int t) const {
    const int b = tables[size_t(seq[size_t(t)]) * 3 + pos[size_t(t)] / bs];
    return (size_t(b) * bs + size_t(pos[size_t(t)] % bs)) * kv_heads * head_dim;
  }
};

std::vector<float> wide_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> e(-12.0f, 10.0f);
  std::vector<float> v(n);
  for (float& x : v) x = std::exp2(e(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
  return v;
}

TEST(KvCacheStorage, WriteKvStoresRoundedValuesForFp8AndExactOnesForModel) {
  const CacheCase c;
  const int kv = c.kv_heads * c.head_dim, stride = kv + 3;
  const auto k_in = wide_values(size_t(c.tokens()) * stride, 1);
  const auto v_in = wide_values(size_t(c.tokens()) * stride, 2);
  for (KvDtype dt : {KvDtype::model, KvDtype::fp8_e4m3}) {
    SCOPED_TRACE(std::string(kernels::kv_dtype_name(dt)));
    std::vector<float> kc(c.cache_size(), NAN), vc = kc;
    const auto L = c.layout();
    k::write_kv(k_in.data(), v_in.data(), stride, kc.data(), vc.data(), c.tables.data(),
                c.seq.data(), c.pos.data(), c.tokens(), L, dt);
    size_t rounded = 0;
    for (int t = 0; t < c.tokens(); ++t)
      for (int i = 0; i < kv; ++i) {
        const float kx = k_in[size_t(t) * stride + i], vx = v_in[size_t(t) * stride + i];
        const float ke = dt == KvDtype::fp8_e4m3 ? k::round_to_e4m3(kx) : kx;
        const float ve = dt == KvDtype::fp8_e4m3 ? k::round_to_e4m3(vx) : vx;
        ASSERT_EQ(kc[c.slot(t) + i], ke) << t << " " << i;
        ASSERT_EQ(vc[c.slot(t) + i], ve) << t << " " << i;
        rounded += kc[c.slot(t) + i] != kx;
      }
    if (dt == KvDtype::fp8_e4m3) {
      EXPECT_GT(rounded, size_t(kv));  // the rounding did happen
    } else {
      EXPECT_EQ(rounded, 0u);
    }
  }
}

TEST(KvCacheStorage, RopeWriteKvRoundsOnlyTheCache) {
  const CacheCase c;
  const int D = c.head_dim, q_size = c.heads * D, kv = c.kv_heads * D;
  const int stride = q_size + 2 * kv + 1;
  const auto qkv0 = wide_values(size_t(c.tokens()) * stride, 3);
  const auto bias = wide_values(size_t(q_size + 2 * kv), 4);
  const std::vector<float> inv_freq = {1.0f, 0.05f};  // rotary_dim 4 of head_dim 5
  const auto L = c.layout();
  std::vector<float> ref_qkv = qkv0, ref_kc(c.cache_size(), NAN), ref_vc = ref_kc;
  k::rope_write_kv(ref_qkv.data(), stride, bias.data(), c.pos.data(), inv_freq.data(), 4, c.heads,
                   ref_kc.data(), ref_vc.data(), c.tables.data(), c.seq.data(), c.tokens(), L);
  std::vector<float> qkv = qkv0, kc(c.cache_size(), NAN), vc = kc;
  k::rope_write_kv(qkv.data(), stride, bias.data(), c.pos.data(), inv_freq.data(), 4, c.heads,
                   kc.data(), vc.data(), c.tables.data(), c.seq.data(), c.tokens(), L,
                   KvDtype::fp8_e4m3);
  EXPECT_EQ(qkv, ref_qkv);  // q, k, v in qkv unrounded, identical to the model-dtype call
  for (int t = 0; t < c.tokens(); ++t)
    for (int i = 0; i < kv; ++i) {
      const size_t s = c.slot(t) + size_t(i);
      // model storage holds qkv's k / v exactly; fp8 storage holds them rounded.
      ASSERT_EQ(ref_kc[s], ref_qkv[size_t(t) * stride + q_size + i]);
      ASSERT_EQ(ref_vc[s], ref_qkv[size_t(t) * stride + q_size + kv + i]);
      ASSERT_EQ(kc[s], k::round_to_e4m3(ref_kc[s])) << t << " " << i;
      ASSERT_EQ(vc[s], k::round_to_e4m3(ref_vc[s])) << t << " " << i;
    }
}

TEST(E4m3, ScaledRoundingDividesThenMultiplies) {
  // 1000 / 4 = 250 lies in [128, 256), where E4M3 steps by 16: 240 or 256, nearer 256; read
  // back as 256 * 4. -3000 / 8 = -375 in [256, 448] (steps of 32): -384, read back as -3072.
  EXPECT_EQ(k::round_to_e4m3(1000.0f, 4.0f), 1024.0f);
  EXPECT_EQ(k::round_to_e4m3(1000.0f, 1.0f), 448.0f);  // scale 1 saturates
  EXPECT_EQ(k::round_to_e4m3(-3000.0f, 8.0f), -3072.0f);
  EXPECT_EQ(k::round_to_e4m3(0.75f, 1.0f), k::round_to_e4m3(0.75f));
  // A non-power-of-two scale (checkpoints carry any positive number): code of x / s, times s.
  const float s = 0.37f, x = 12.3f;
  EXPECT_EQ(k::round_to_e4m3(x, s), k::decode_e4m3(k::encode_e4m3(x / s)) * s);
  for (float v : wide_values(4096, 9)) {
    const float big = v * 64.0f;  // up to 2^16: far beyond 448
    const float held = k::round_to_e4m3(big, 256.0f);
    // Scale 256 holds |x| <= 114688 unsaturated: within half an E4M3 step (1/16 relative) of x,
    // or of the smallest subnormal step 2^-9 * 256 near zero.
    ASSERT_LE(std::fabs(held - big), std::max(std::fabs(big) / 16.0f, 0.5f * 256.0f / 512.0f))
        << big;
  }
}

// The scales of PagedKvLayout: K's with scale.k, V's with scale.v, on both CPU cache writers.
TEST(KvCacheStorage, Fp8WritesUseTheLayoutsKAndVScales) {
  const CacheCase c;
  const int D = c.head_dim, q_size = c.heads * D, kv = c.kv_heads * D;
  const int stride = q_size + 2 * kv;
  auto qkv0 = wide_values(size_t(c.tokens()) * stride, 5);
  for (float& x : qkv0) x *= 32.0f;  // up to 2^15: saturates at scale 1
  auto L = c.layout();
  L.scale = {128.0f, 0.75f};  // K: |x| < 2^15 held unsaturated; V: saturates, as rounded
  std::vector<float> kc(c.cache_size(), NAN), vc = kc;
  k::write_kv(qkv0.data() + q_size, qkv0.data() + q_size + kv, stride, kc.data(), vc.data(),
              c.tables.data(), c.seq.data(), c.pos.data(), c.tokens(), L, KvDtype::fp8_e4m3);
  std::vector<float> qkv = qkv0, rkc(c.cache_size(), NAN), rvc = rkc;
  k::rope_write_kv(qkv.data(), stride, nullptr, c.pos.data(), nullptr, 0, c.heads, rkc.data(),
                   rvc.data(), c.tables.data(), c.seq.data(), c.tokens(), L, KvDtype::fp8_e4m3);
  size_t beyond_448 = 0;
  for (int t = 0; t < c.tokens(); ++t)
    for (int i = 0; i < kv; ++i) {
      const size_t s = c.slot(t) + size_t(i);
      const float kx = qkv0[size_t(t) * stride + q_size + i];
      const float vx = qkv0[size_t(t) * stride + q_size + kv + i];
      ASSERT_EQ(kc[s], k::round_to_e4m3(kx, 128.0f)) << t << " " << i;
      ASSERT_EQ(vc[s], k::round_to_e4m3(vx, 0.75f)) << t << " " << i;
      ASSERT_EQ(rkc[s], kc[s]);
      ASSERT_EQ(rvc[s], vc[s]);
      if (std::fabs(kx) > 448.0f) {
        ++beyond_448;
        EXPECT_LE(std::fabs(kc[s] - kx), std::fabs(kx) / 16.0f);  // held, not saturated
      }
    }
  EXPECT_GT(beyond_448, 0u);
}

}  // namespace
}  // namespace lmx
