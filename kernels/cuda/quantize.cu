#include "kernels/quantize.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/common.cuh"

namespace lmx::kernels::cuda {
namespace {

using detail::block_max;
using detail::from_f;
using detail::to_f;

constexpr int kThreads = 256;

// One block a row: the row's max |v|, then each value divided by the scale; v = w (times the
// column's scale, one fp32 rounding, as the CPU reference's product).
template <typename T>
__global__ void quantize_rows_kernel(const T* __restrict__ w, const float* __restrict__ col_scale,
                                     int8_t* __restrict__ q, float* __restrict__ scale, int cols) {
  __shared__ float scratch[33];
  const T* row = w + size_t(blockIdx.x) * cols;
  const auto value = [&](int c) {
    return col_scale ? __fmul_rn(to_f(row[c]), col_scale[c]) : to_f(row[c]);
  };
  float m = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, fabsf(value(c)));
  m = block_max(m, scratch);
  const float s = __fdiv_rn(m, 127.0f);  // IEEE division, as the CPU reference's
  if (threadIdx.x == 0) scale[blockIdx.x] = s;
  int8_t* out = q + size_t(blockIdx.x) * cols;
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    const float v = s > 0.0f ? rintf(__fdiv_rn(value(c), s)) : 0.0f;
    out[c] = int8_t(fminf(fmaxf(v, -127.0f), 127.0f));
  }
}

// Grid-stride over q [rows, cols].
template <typename T>
__global__ void dequantize_rows_kernel(const int8_t* __restrict__ q,
                                       const float* __restrict__ scale, T* __restrict__ out,
                                       size_t n, int cols) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = from_f<T>(float(q[i]) * scale[i / cols]);
}

}  // namespace

template <typename T>
void quantize_rows_int8(const T* w, const float* col_scale, int8_t* q, float* scale, int rows,
                        int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  quantize_rows_kernel<T><<<rows, kThreads, 0, stream>>>(w, col_scale, q, scale, cols);
}

template <typename T>
void dequantize_rows_int8(const int8_t* q, const float* scale, T* out, int rows, int cols,
                          cudaStream_t stream) {
  const size_t n = size_t(rows) * cols;
  if (n == 0) return;
  const int blocks = int(std::min<size_t>((n + kThreads - 1) / kThreads, 132 * 16));
  dequantize_rows_kernel<T><<<blocks, kThreads, 0, stream>>>(q, scale, out, n, cols);
}

#define LMX_INSTANTIATE(T)                                                                 \
  template void quantize_rows_int8<T>(const T*, const float*, int8_t*, float*, int, int,    \
                                      cudaStream_t);                                       \
  template void dequantize_rows_int8<T>(const int8_t*, const float*, T*, int, int, cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
