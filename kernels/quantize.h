// Int8 rows (quant/int8.h's format, per output channel) and FP8 E4M3 rows (quant/fp8.h's) on the
// GPU, for quantized weights as they are loaded and for per-token activations:
//   quantize_rows_int8:   w [rows, cols] T (times col_scale [cols] fp32 when not null) -> q [rows,
//                         cols] int8, scale [rows] fp32, exactly as quant::cpu::quantize_int8 with
//                         group = cols (weights) and quant::cpu::quantize_rows_int8 (activations,
//                         col_scale = 1/s) do from the same values: v = w * col_scale in fp32,
//                         max |v| / 127 in fp32, v / scale rounded half to even, clamped to 127.
//                         SmoothQuant's weight W diag(s) is quantized with col_scale = s.
//                         q's rows are stored in kernels/int8_layout.h's order (each complete
//                         group of 16 codes of a row of q_ld permuted for the tensor cores).
//   dequantize_rows_int8: out [rows, cols] T = T(q[r, c] * scale[r])  (one rounding; q as
//                         quantize_rows_int8 stores it, rows of cols)
//   quantize_rows_e4m3:   x [rows, cols] T -> codes [rows, codes_ld] E4M3, scale [rows] fp32, bit
//                         for bit as quant::cpu::quantize_rows_e4m3 (quant/fp8.h) from the same
//                         values: max |x| / 448 in fp32, x / scale in fp32, cvt.rn.satfinite to
//                         E4M3 (0 for an all-zero row); codes cols..codes_ld-1 of each row are
//                         zeros (the FP8 GEMM's K padded to 16: kernels/fp8_linear.h).
//                         option.quantize=fp8's weights at load and activations per token.
//   encode_rows_e4m3:     x [rows, cols] T -> codes [rows, codes_ld] = E4M3(x), no scaling, zeros
//                         past cols: kernels/kv_dtype.h's encode_e4m3 of each value. An fp8
//                         checkpoint's weights, which arrive as their codes' values (exact in
//                         T), back to the checkpoint's codes.
//   quantize_act_rows_int8 / _e4m3: the same quantizers over an MLP's activation, which is
//                         never stored (MlpActivation): x = act(in + bias) of in [rows, cols],
//                         bias [cols] or null, or, gated, act(in[:, :cols] + bias[:cols]) *
//                         (in[:, cols:] + bias[cols:]) of in [rows, 2 cols] (gate | up), bias
//                         [2 cols] or null; each value rounded to T as bias_act /
//                         bias_gated_act (kernels/activation.h) store it, so the codes and scales
//                         equal those kernels' followed by quantize_rows_int8 / quantize_rows_e4m3
//                         (the down projection's input of smoothquant and fp8 past decode sizes:
//                         one pass instead of two).
//   quantize_add_norm_rows_int8 / _e4m3: the same over a pre-norm block's input, which is never
//                         stored (AddNorm): residual += delta as add_rms_norm / add_layer_norm
//                         (kernels/norm.h) do it (delta null: residual unchanged), the codes and
//                         scales of their output [rows, cols] (the same values, rounded to T, bit
//                         for bit). Returns false and launches nothing where the fused kernel
//                         does not apply: T = float, more than 8192 columns or not whole 16-byte
//                         pieces, a pointer not 16-byte aligned, int8 rows padded past cols,
//                         LayerNorm without a bias; the caller then runs the norm and the
//                         quantizer.
// T = float, __half or __nv_bfloat16; device memory; no allocation, no synchronization.
#pragma once

#include <cstdint>

#include "kernels/activation.h"
#include "kernels/stream.h"

namespace lmx::kernels::cuda {

// An MLP's activation, as bias_act (plain) and bias_gated_act (gated) compute it.
struct MlpActivation {
  ActivationKind kind;
  bool gated;
};

// A pre-norm block's residual add and norm, as add_rms_norm / add_layer_norm take them.
template <typename T>
struct AddNorm {
  T* residual;      // [rows, cols], updated
  const T* delta;   // [rows, cols] or null
  const T* weight;  // [cols]
  const T* bias;    // [cols] (LayerNorm)
  float eps;
  bool layer_norm;  // LayerNorm, else RMSNorm
};

template <typename T>
void quantize_rows_int8(const T* w, const float* col_scale, int8_t* q, float* scale, int rows,
                        int cols, cudaStream_t stream);
// The same into rows of q_ld >= cols codes, zeros past cols (the int8 GEMM's K padded:
// kernels/w8a8.h's w8a8_padded).
template <typename T>
void quantize_rows_int8(const T* w, const float* col_scale, int8_t* q, float* scale, int rows,
                        int cols, int q_ld, cudaStream_t stream);
template <typename T>
void dequantize_rows_int8(const int8_t* q, const float* scale, T* out, int rows, int cols,
                          cudaStream_t stream);
template <typename T>
void quantize_rows_e4m3(const T* x, uint8_t* codes, float* scale, int rows, int cols,
                        int codes_ld, cudaStream_t stream);
template <typename T>
void quantize_act_rows_int8(MlpActivation act, const T* in, const T* bias, const float* col_scale,
                            int8_t* q, float* scale, int rows, int cols, int q_ld,
                            cudaStream_t stream);
template <typename T>
void quantize_act_rows_e4m3(MlpActivation act, const T* in, const T* bias, uint8_t* codes,
                            float* scale, int rows, int cols, int codes_ld, cudaStream_t stream);
template <typename T>
bool quantize_add_norm_rows_int8(const AddNorm<T>& norm, const float* col_scale, int8_t* q,
                                 float* scale, int rows, int cols, int q_ld, cudaStream_t stream);
template <typename T>
bool quantize_add_norm_rows_e4m3(const AddNorm<T>& norm, uint8_t* codes, float* scale, int rows,
                                 int cols, int codes_ld, cudaStream_t stream);
template <typename T>
void encode_rows_e4m3(const T* x, uint8_t* codes, int rows, int cols, int codes_ld,
                      cudaStream_t stream);

}  // namespace lmx::kernels::cuda
