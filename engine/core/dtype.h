// Element types of checkpoint tensors and conversions to fp32 (the CPU backend computes in fp32).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace lmx {

// F8_E4M3: OCP FP8 E4M3 codes (fp8 checkpoints' weights, with scales beside them: converting one
// gives the code's value, unscaled).
enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL, F8_E4M3 };

std::optional<DType> dtype_from_safetensors(std::string_view name);  // "F32" -> F32
std::string_view dtype_name(DType dtype);                          // F32 -> "F32"
size_t dtype_size(DType dtype);                                     // bytes per element

inline float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

// IEEE 754 binary16 -> binary32, exact for every input (subnormals, inf, NaN).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int shift = 0;
      while ((mantissa & 0x400) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ff;
      bits = sign | uint32_t(127 - 15 + 1 - shift) << 23 | (mantissa << 13);
    }
  } else {
    bits = sign | (exponent + (127 - 15)) << 23 | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

// Converts `count` elements of a floating dtype (F32/F16/BF16/F64) at `src` (any alignment) to fp32.
void convert_to_f32(DType dtype, const std::byte* src, size_t count, float* dst);

}  // namespace lmx
