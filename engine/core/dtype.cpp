#include "engine/core/dtype.h"

#include <array>
#include <utility>

#include "engine/core/error.h"
#include "kernels/kv_dtype.h"

namespace lmx {
namespace {

constexpr std::array<std::pair<std::string_view, DType>, 11> kNames = {{
    {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"F64", DType::F64},
    {"I64", DType::I64}, {"I32", DType::I32}, {"I16", DType::I16}, {"I8", DType::I8},
    {"U8", DType::U8}, {"BOOL", DType::BOOL}, {"F8_E4M3", DType::F8_E4M3},
}};

template <typename T>
T load_unaligned(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& [n, d] : kNames)
    if (n == name) return d;
  return std::nullopt;
}

std::string_view dtype_name(DType dtype) {
  for (const auto& [n, d] : kNames)
    if (d == dtype) return n;
  return "?";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: return 2;
    case DType::I8: case DType::U8: case DType::BOOL: case DType::F8_E4M3: return 1;
  }
  return 0;
}

void convert_to_f32(DType dtype, const std::byte* src, size_t count, float* dst) {
  switch (dtype) {
    case DType::F32:
      if (count > 0) std::memcpy(dst, src, count * sizeof(float));  // an empty tensor: no pointers
      return;
    case DType::F16:
      for (size_t i = 0; i < count; ++i) dst[i] = f16_to_f32(load_unaligned<uint16_t>(src + 2 * i));
      return;
    case DType::BF16:
      for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(load_unaligned<uint16_t>(src + 2 * i));
      return;
    case DType::F64:
      for (size_t i = 0; i < count; ++i) dst[i] = float(load_unaligned<double>(src + 8 * i));
      return;
    case DType::F8_E4M3:
      for (size_t i = 0; i < count; ++i)
        dst[i] = kernels::cpu::decode_e4m3(std::to_integer<uint8_t>(src[i]));
      return;
    default:
      throw_error("cannot convert {} tensor data to F32", dtype_name(dtype));
  }
}

}  // namespace lmx
