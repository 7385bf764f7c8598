// How the paged KV cache stores K and V (option.kv_cache_dtype).
//
// model:    the model's compute dtype (CUDA: T = fp16 / bf16 / fp32; CPU reference: fp32).
// fp8_e4m3: one byte per value, OCP FP8 E4M3 (1 sign, 4 exponent bits with bias 7, 3 mantissa
//           bits; largest finite 448, smallest subnormal 2^-9), per-tensor scale 1.0: a value is
//           stored as round_to_e4m3(x), round to nearest even, saturating to +-448 (NaN stays NaN),
//           exactly PTX `cvt.rn.satfinite.e4m3x2.f32`. Halves the cache against fp16: twice the
//           tokens in the same memory and half the bytes each decode step reads.
// The CPU reference emulates fp8 storage by rounding through these functions on the cache write
// (cache buffers stay fp32), so CUDA fp8 kernels are tested against it like every other op.
#pragma once

#include <cstdint>
#include <string_view>

namespace lmx::kernels {

enum class KvDtype { model, fp8_e4m3 };

constexpr std::string_view kv_dtype_name(KvDtype d) {
  return d == KvDtype::fp8_e4m3 ? "fp8_e4m3" : "model";
}

// Bytes of one cached value: model_bytes (the compute dtype's size) or 1 for fp8.
constexpr int kv_value_bytes(KvDtype d, int model_bytes) {
  return d == KvDtype::fp8_e4m3 ? 1 : model_bytes;
}

namespace cpu {

// E4M3 code of x: round to nearest even, saturating to +-448, any NaN -> 0x7F (as the PTX cvt).
uint8_t encode_e4m3(float x);
// The value of an E4M3 code (0x7F / 0xFF: NaN).
float decode_e4m3(uint8_t code);
// decode_e4m3(encode_e4m3(x)): x as the fp8 cache would hold it.
inline float round_to_e4m3(float x) { return decode_e4m3(encode_e4m3(x)); }

}  // namespace cpu
}  // namespace lmx::kernels
