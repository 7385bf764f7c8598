// kernels/calibration.h on the GPU. Calibration-time ops (a few calls a projection a forward):
// simple rather than fast.
//   column_abs_max: a thread a column over a chunk of kRowsPerBlock rows, then an atomicMax on
//   the float's bits, which orders non-negative floats (and puts a positive NaN above infinity).
//   squared_error_sums: grid-stride fp64 sums, warp shuffles, one atomicAdd a warp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/calibration.h"
#include "kernels/cuda/common.cuh"

namespace lmx::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = 32;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    column_abs_max_kernel(const T* x, int rows, int cols, int ld, unsigned* out) {
  const int j = blockIdx.x * kThreads + threadIdx.x;
  if (j >= cols) return;
  const int first = blockIdx.y * kRowsPerBlock, last = min(rows, first + kRowsPerBlock);
  unsigned m = 0;  // the bits of +0.0f
  for (int t = first; t < last; ++t)
    m = max(m, __float_as_uint(fabsf(detail::to_f(x[size_t(t) * size_t(ld) + size_t(j)]))));
  atomicMax(out + j, m);
}

__global__ void __launch_bounds__(kThreads)
    squared_error_sums_kernel(const float* y, const float* ref, size_t n, double* sums) {
  double error = 0.0, reference = 0.0;
  for (size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += size_t(gridDim.x) * kThreads) {
    const double d = double(y[i]) - double(ref[i]);
    error += d * d;
    reference += double(ref[i]) * double(ref[i]);
  }
  for (int o = 16; o > 0; o >>= 1) {
    error += __shfl_xor_sync(0xffffffffu, error, o);
    reference += __shfl_xor_sync(0xffffffffu, reference, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(sums, error);
    atomicAdd(sums + 1, reference);
  }
}

template <typename From, typename To>
__global__ void __launch_bounds__(kThreads) convert_kernel(const From* in, To* out, size_t n) {
  for (size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += size_t(gridDim.x) * kThreads)
    out[i] = detail::from_f<To>(detail::to_f(in[i]));
}

// Blocks for a grid-stride loop over n values: enough to fill the GPU, no more than needed.
unsigned stride_blocks(size_t n) {
  return unsigned(std::min<size_t>((n + kThreads - 1) / kThreads, 4096));
}

}  // namespace

template <typename T>
void column_abs_max(const T* x, int rows, int cols, int ld, float* out, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 grid((cols + kThreads - 1) / kThreads, (rows + kRowsPerBlock - 1) / kRowsPerBlock);
  column_abs_max_kernel<T>
      <<<grid, kThreads, 0, stream>>>(x, rows, cols, ld, reinterpret_cast<unsigned*>(out));
}

void squared_error_sums(const float* y, const float* ref, size_t n, double* sums,
                        cudaStream_t stream) {
  if (n == 0) return;
  squared_error_sums_kernel<<<stride_blocks(n), kThreads, 0, stream>>>(y, ref, n, sums);
}

template <typename From, typename To>
void convert(const From* in, To* out, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  convert_kernel<From, To><<<stride_blocks(n), kThreads, 0, stream>>>(in, out, n);
}

template void column_abs_max<float>(const float*, int, int, int, float*, cudaStream_t);
template void column_abs_max<__half>(const __half*, int, int, int, float*, cudaStream_t);
template void column_abs_max<__nv_bfloat16>(const __nv_bfloat16*, int, int, int, float*,
                                            cudaStream_t);
template void convert<float, float>(const float*, float*, size_t, cudaStream_t);
template void convert<float, __half>(const float*, __half*, size_t, cudaStream_t);
template void convert<float, __nv_bfloat16>(const float*, __nv_bfloat16*, size_t, cudaStream_t);
template void convert<__half, float>(const __half*, float*, size_t, cudaStream_t);
template void convert<__nv_bfloat16, float>(const __nv_bfloat16*, float*, size_t, cudaStream_t);

}  // namespace lmx::kernels::cuda
