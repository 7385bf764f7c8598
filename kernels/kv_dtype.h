// How the paged KV cache stores K and V (option.kv_cache_dtype).
//
// model:    the model's compute dtype (CUDA: T = fp16 / bf16 / fp32; CPU reference: fp32).
// fp8_e4m3: one byte per value, OCP FP8 E4M3 (1 sign, 4 exponent bits with bias 7, 3 mantissa
//           bits; largest finite 448, smallest subnormal 2^-9), with a dequantization scale per
//           layer for K and one for V (KvScale): a value x is stored as the code
//           encode_e4m3(x / scale) (round to nearest even, saturating to +-448, NaN stays NaN,
//           exactly PTX `cvt.rn.satfinite.e4m3x2.f32`) and read as decode_e4m3(code) * scale, so
//           |x| up to 448 * scale is held without saturating. Halves the cache against fp16:
//           twice the tokens in the same memory and half the bytes each decode step reads.
// The scales (docs/configuration.md, option.kv_cache_scale): the checkpoint's k_scale / v_scale
// when it has them (engine/model/kv_scales.h), else a calibration pass at load over a built-in
// text (smoothquant/kv_calibration.h), else a fixed value the configuration names. The model
// dtype cache has scales 1 (nothing is divided or multiplied).
// The CPU reference emulates fp8 storage by rounding through these functions on the cache write
// (cache buffers stay fp32 and hold decode(code) * scale), so CUDA fp8 kernels are tested
// against it like every other op. The CUDA kernels store the codes and fold the scales into the
// reads: K's into the softmax scale (s = scale * k_scale * dot(q, code)), V's into the output's
// normalization (out = v_scale * sum(p * code) / sum(p)).
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

// One layer's dequantization scales (positive, finite): cached K = code * k, cached V = code * v.
struct KvScale {
  float k = 1.0f;
  float v = 1.0f;
};

namespace cpu {

// E4M3 code of x: round to nearest even, saturating to +-448, any NaN -> 0x7F (as the PTX cvt).
uint8_t encode_e4m3(float x);
// The value of an E4M3 code (0x7F / 0xFF: NaN).
float decode_e4m3(uint8_t code);
// decode_e4m3(encode_e4m3(x)): x as the fp8 cache would hold it.
inline float round_to_e4m3(float x) { return decode_e4m3(encode_e4m3(x)); }
// x as an fp8 cache with dequantization scale `scale` holds it: decode(encode(x / scale)) * scale
// (IEEE division, as the CUDA cache writers compute it).
inline float round_to_e4m3(float x, float scale) {
  return decode_e4m3(encode_e4m3(x / scale)) * scale;
}

}  // namespace cpu
}  // namespace lmx::kernels
