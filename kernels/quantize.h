// Int8 rows on the GPU (the format of quant/int8.h, per output channel), for dynamic_int8's and
// smoothquant's weights as they are loaded and for smoothquant's per-token activations:
//   quantize_rows_int8:   w [rows, cols] T (times col_scale [cols] fp32 when not null) -> q [rows,
//                         cols] int8, scale [rows] fp32, exactly as quant::cpu::quantize_int8 with
//                         group = cols (weights) and quant::cpu::quantize_rows_int8 (activations,
//                         col_scale = 1/s) do from the same values: v = w * col_scale in fp32,
//                         max |v| / 127 in fp32, v / scale rounded half to even, clamped to 127.
//                         SmoothQuant's weight W diag(s) is quantized with col_scale = s.
//   dequantize_rows_int8: out [rows, cols] T = T(q[r, c] * scale[r])  (one rounding)
// T = float, __half or __nv_bfloat16; device memory; no allocation, no synchronization.
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace lmx::kernels::cuda {

template <typename T>
void quantize_rows_int8(const T* w, const float* col_scale, int8_t* q, float* scale, int rows,
                        int cols, cudaStream_t stream);
template <typename T>
void dequantize_rows_int8(const int8_t* q, const float* scale, T* out, int rows, int cols,
                          cudaStream_t stream);

}  // namespace lmx::kernels::cuda
