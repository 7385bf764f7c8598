// option.quantize=fp8 (FP8 W8A8, issue 26): OCP FP8 E4M3 weights with one fp32 scale per output
// channel, quantized at load, and E4M3 activations with one scale per token, quantized at run
// time; the CPU reference (docs/quantization.md). E4M3 is kernels/kv_dtype.h's: round to nearest
// even, saturating to +-448, exactly PTX `cvt.rn.satfinite.e4m3x2.f32`.
//
// Rows of a matrix a [rows, in] fp32 (a weight's output channels, or an activation's tokens):
//   scale [rows] fp32:       s[r] = max_k |a[r, k]| / 448                 (0 for an all-zero row)
//   codes [rows, in] E4M3:   q[r, k] = e4m3(a[r, k] / s[r])               (0 where s = 0)
// (with `col_scale` [in], a[r, k] * col_scale[k] in fp32 in place of a[r, k]). The quotient is
// an fp32 division, so a GPU quantizer reproduces the codes bit for bit.
// The linear, for a weight (wq [out, in], ws [out]) and activations x [rows, in]:
//   acc [rows, out] fp32 = sum_k e4m3val(xq[m, k]) * e4m3val(wq[o, k])  (each product exact in
//                          fp32: 4 + 4 significant bits; summed in fp32, k in order)
//   y   [rows, out] fp32 = acc * xs[m] * ws[o] + bias[o]
// With grouped weight scales (a block-scaled fp8 checkpoint: `group` = 128, ws [out, in / group],
// W[o, k] = e4m3val(wq[o, k]) * ws[o, k / group]), each group's sum is scaled on its own:
//   acc_g [rows, out] fp32 = the sum above over k in [g * group, (g + 1) * group)
//   y     [rows, out] fp32 = xs[m] * (sum_g ws[o, g] * acc_g, g in order) + bias[o]
// The GPU's FP8 tensor cores sum in another order (and Hopper's with fewer accumulator bits), so
// a CUDA linear equals this within the sums' rounding, not bit for bit.
#pragma once

#include <cstdint>

namespace lmx::quant {

inline constexpr float kE4m3Max = 448.0f;

// One fp8 projection's weight as the linear takes it (host memory for the CPU reference).
struct Fp8Weights {
  const uint8_t* codes = nullptr;  // [out, in] E4M3
  const float* scales = nullptr;   // [out], or [out, in / group] when group > 0
  const float* bias = nullptr;     // [out] or null
  int out = 0, in = 0;
  int group = 0;  // input columns a scale covers (divides in); 0 (or in): one scale a row
};

namespace cpu {

// a [rows, in] fp32 -> codes [rows, in] E4M3, scales [rows] as above. `what` names a weight in
// errors (a non-finite value; activations are not checked: a non-finite row fails its request
// at the logits).
void quantize_rows_e4m3(const char* what, const float* a, int64_t rows, int64_t in,
                        uint8_t* codes, float* scales, bool check_finite = true);

// y [rows, w.out] = FP8 W8A8 linear of x [rows, w.in] (per-token E4M3 activations), as above.
// Throws lmx::Error when w.group does not divide w.in.
void fp8_linear(const float* x, const Fp8Weights& w, float* y, int rows);

}  // namespace cpu
}  // namespace lmx::quant
