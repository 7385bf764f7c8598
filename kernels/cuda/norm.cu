#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/norm.h"

namespace lmx::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float block_sum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

// One block per row: [rows, cols] -> [rows, cols].
template <typename T>
__global__ void rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ weight,
                                T* __restrict__ out, int cols, float eps) {
  const size_t row = size_t(blockIdx.x) * cols;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    const float v = float(x[row + c]);
    sum += v * v;
  }
  const float inv = rsqrtf(block_sum(sum) / float(cols) + eps);
  for (int c = threadIdx.x; c < cols; c += kThreads)
    out[row + c] = T(float(weight[c]) * (float(x[row + c]) * inv));
}

}  // namespace

template <typename T>
void rms_norm(const T* x, const T* weight, T* out, int rows, int cols, float eps,
              cudaStream_t stream) {
  if (rows == 0) return;
  rms_norm_kernel<T><<<rows, kThreads, 0, stream>>>(x, weight, out, cols, eps);
}

template void rms_norm<float>(const float*, const float*, float*, int, int, float, cudaStream_t);
template void rms_norm<__half>(const __half*, const __half*, __half*, int, int, float, cudaStream_t);
template void rms_norm<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                      int, int, float, cudaStream_t);

}  // namespace lmx::kernels::cuda
