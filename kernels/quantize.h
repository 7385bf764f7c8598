// dynamic_int8 on the GPU (the format of quant/int8.h, per output channel): weights quantized as
// they are loaded, and expanded back to T for the GEMMs that run through cuBLAS (prefill and
// batches past the skinny GEMV's rows).
//   quantize_rows_int8:   w [rows, cols] T -> q [rows, cols] int8, scale [rows] fp32, exactly as
//                         quant::cpu::quantize_int8 with group = cols does from the same values
//                         (max |w| / 127 in fp32, w / scale rounded half to even, clamped to 127)
//   dequantize_rows_int8: out [rows, cols] T = T(q[r, c] * scale[r])  (one rounding)
// T = float, __half or __nv_bfloat16; device memory; no allocation, no synchronization.
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace lmx::kernels::cuda {

template <typename T>
void quantize_rows_int8(const T* w, int8_t* q, float* scale, int rows, int cols,
                        cudaStream_t stream);
template <typename T>
void dequantize_rows_int8(const int8_t* q, const float* scale, T* out, int rows, int cols,
                          cudaStream_t stream);

}  // namespace lmx::kernels::cuda
