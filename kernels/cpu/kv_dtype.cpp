// OCP FP8 E4M3 ("E4M3FN") encode / decode, bit-exact with PTX `cvt.rn.satfinite.e4m3x2.f32`:
// round to nearest, ties to even (also into and out of the subnormals and up into the next
// binade), finite values and infinities beyond the largest finite 448 saturate to +-448, any NaN
// (either sign) -> 0x7F, -0.0 -> 0x80. Checked against the instruction on an H100 for all 2^32
// fp32 bit patterns (the hardware drops a NaN's sign; 0x7F / 0xFF are the only NaN codes).
#include "kernels/kv_dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace lmx::kernels::cpu {
namespace {

constexpr uint8_t kMaxFinite = 0x7E;  // 0 1111 110 = 1.75 * 2^8 = 448
constexpr uint8_t kNaN = 0x7F;

// Round-half-even of y >= 0 to an integer; y < 2^23, so y - floor(y) is exact.
uint32_t round_half_even(float y) {
  const float f = std::floor(y);
  const float frac = y - f;
  uint32_t n = uint32_t(f);
  if (frac > 0.5f || (frac == 0.5f && (n & 1u))) ++n;
  return n;
}

constexpr float pow2(int n) {  // exact for the exponents used here
  float p = 1.0f;
  for (; n > 0; --n) p *= 2.0f;
  for (; n < 0; ++n) p *= 0.5f;
  return p;
}

constexpr std::array<float, 256> make_decode_table() {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const int e = (c >> 3) & 0xF, m = c & 7;
    float v = 0.0f;
    if (e == 0xF && m == 7)
      v = std::numeric_limits<float>::quiet_NaN();
    else if (e == 0)
      v = float(m) * pow2(-9);  // subnormal: m / 8 * 2^-6
    else
      v = float(8 + m) * pow2(e - 10);  // (1 + m / 8) * 2^(e - 7)
    t[size_t(c)] = (c & 0x80) ? -v : v;
  }
  return t;
}

constexpr std::array<float, 256> kDecode = make_decode_table();
static_assert(kDecode[0x7E] == 448.0f && kDecode[0x01] == pow2(-9) && kDecode[0x08] == pow2(-6));

}  // namespace

uint8_t encode_e4m3(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return kNaN;
  const int exp = int(abs >> 23) - 127;  // unbiased fp32 exponent (-127 for zero / subnormals)
  if (exp > 8) return uint8_t(sign | kMaxFinite);  // >= 512 and +-inf
  uint32_t code;
  if (exp < -6) {
    // Below the smallest normal 2^-6: multiples of 2^-9. |x| * 2^9 < 8 is exact; a result of 8
    // is code 0x08, the smallest normal, so rounding up out of the subnormals needs no case.
    code = round_half_even(std::bit_cast<float>(abs) * 512.0f);
  } else {
    // Normal: keep 3 of the 23 mantissa bits, round half to even on the 20 dropped ones. A
    // carry out of the mantissa bumps the exponent, which is the right next code.
    const uint32_t mant = abs & 0x7FFFFFu;
    code = (uint32_t(exp + 7) << 3) | (mant >> 20);
    const uint32_t rest = mant & 0xFFFFFu, half = 0x80000u;
    if (rest > half || (rest == half && (code & 1u))) ++code;
    if (code > kMaxFinite) code = kMaxFinite;  // 464 and up would round to 480 / NaN: saturate
  }
  return uint8_t(sign | code);
}

float decode_e4m3(uint8_t code) { return kDecode[code]; }

}  // namespace lmx::kernels::cpu
