// row_dots (kernels/row_dots.h): one warp a weight row, lanes striding over k, fp32 sums reduced
// with shuffles. A load-time op (a few calls a layer): simple rather than fast.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/int8_layout.h"
#include "kernels/row_dots.h"

namespace lmx::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// W[n, k] as the projection's kernels multiply it, before its scale (`row`: n x w.in; int8
// values stored in kernels/int8_layout.h's order).
template <typename T>
__device__ __forceinline__ float weight_at(const LinearWeights<T>& w, size_t row, int k) {
  if (w.q == nullptr) return detail::to_f(w.weight[row + k]);
  if (w.e4m3) {
    __nv_fp8_e4m3 code;
    code.__x = static_cast<__nv_fp8_storage_t>(w.q[row + k]);
    return float(code);
  }
  return float(w.q[row + int8_position(k, w.in)]);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) row_dots_kernel(LinearWeights<T> w, const T* v,
                                                            float* out, int group) {
  const int lane = threadIdx.x % 32;
  for (int n = blockIdx.x * kWarps + threadIdx.x / 32; n < w.out; n += gridDim.x * kWarps) {
    const size_t row = size_t(n) * size_t(w.in);
    // group > 0: w.grouped(), a scale per `group` k of the row.
    const float* scales = group > 0 ? w.q_scale + size_t(n) * size_t(w.in / group) : nullptr;
    float sum = 0.0f;
    for (int k = lane; k < w.in; k += 32)
      sum += weight_at(w, row, k) * (scales ? scales[k / group] : 1.0f) *
             (v ? detail::to_f(v[k]) : 1.0f);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) out[n] = w.q != nullptr && !scales ? sum * w.q_scale[n] : sum;
  }
}

}  // namespace

template <typename T>
void row_dots(const LinearWeights<T>& w, const T* v, float* out, cudaStream_t stream) {
  if (w.out <= 0) return;
  const int blocks = std::min((w.out + kWarps - 1) / kWarps, 132 * 8);
  row_dots_kernel<T>
      <<<blocks, kThreads, 0, stream>>>(w.without_bias(), v, out, w.grouped() ? w.group : 0);
}

template void row_dots<float>(const LinearWeights<float>&, const float*, float*, cudaStream_t);
template void row_dots<__half>(const LinearWeights<__half>&, const __half*, float*, cudaStream_t);
template void row_dots<__nv_bfloat16>(const LinearWeights<__nv_bfloat16>&, const __nv_bfloat16*,
                                      float*, cudaStream_t);

}  // namespace lmx::kernels::cuda
