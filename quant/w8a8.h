// The W8A8 linear of option.quantize=smoothquant (docs/quantization.md): int8 weights per output
// channel (the dynamic_int8 format of quant/int8.h with group = in), int8 activations per token
// (per row), an int8 x int8 -> int32 GEMM and a scaling epilogue back to fp32. Shared by
// smoothquant/ (which smooths the weights before they are quantized) and the backends.
//
// Per-token activation quantization of x [rows, in] fp32:
//   xs [rows]      fp32: xs[m] = max_k |x[m, k]| / 127         (0 for an all-zero row)
//   xq [rows, in]  int8: xq[m, k] = clamp(round_half_even(x[m, k] / xs[m]), -127, 127)
// GEMM and epilogue, for a weight quantized as (wq [out, in] int8, ws [out] fp32):
//   acc [rows, out] int32: acc[m, o] = sum_k xq[m, k] * wq[o, k]   (exact: |acc| < 2^31 for in <= kMaxIn)
//   y   [rows, out] fp32:  y[m, o] = float(acc[m, o]) * xs[m] * ws[o] + bias[o]
// Rounding is half to even, quotients in fp32, as in quant/int8.h, so a GPU kernel (cvt.rni,
// IMMA with an int32 accumulator, the same epilogue) can reproduce the int8 bytes and the int32
// sums exactly; only the epilogue's fp32 products may round differently.
#pragma once

#include <cstdint>

namespace lmx::quant {

// The largest input size whose int32 sums cannot overflow: in * 127 * 127 < 2^31.
inline constexpr int64_t kW8A8MaxIn = (int64_t(1) << 31) / (127 * 127);

// One W8A8 projection's weight as the linear takes it (host memory for the CPU reference).
struct W8A8Weights {
  const int8_t* values = nullptr;  // [out, in], per output channel (quant/int8.h, group = in)
  const float* scales = nullptr;   // [out]
  const float* bias = nullptr;     // [out] or null
  int out = 0, in = 0;
};

namespace cpu {

// x [rows, in] fp32 -> xq [rows, in] int8, xs [rows] fp32 as above. With `inv_smooth` ([in], or
// null) the row quantized is x[m, k] * inv_smooth[k] (an explicit smoothing scale, where it could
// not be folded into what produces x).
void quantize_rows_int8(const float* x, const float* inv_smooth, int rows, int in, int8_t* xq,
                        float* xs);

// acc [rows, out] int32 = a [rows, in] int8 · b [out, in]^T int8 (exact integer sums).
void int8_gemm(const int8_t* a, const int8_t* b, int32_t* acc, int rows, int out, int in);

// y [rows, out] fp32 = acc * row_scale[m] * col_scale[o] + bias[o] (bias may be null).
void scale_epilogue(const int32_t* acc, const float* row_scale, const float* col_scale,
                    const float* bias, float* y, int rows, int out);

// y [rows, w.out] = W8A8(x [rows, w.in]): the three steps above (with `inv_smooth` as in
// quantize_rows_int8). Throws lmx::Error when w.in exceeds kW8A8MaxIn or a size is not positive.
void w8a8_linear(const float* x, const W8A8Weights& w, float* y, int rows,
                 const float* inv_smooth = nullptr);

}  // namespace cpu
}  // namespace lmx::quant
