// Device helpers shared by the element-wise / row kernels: 16-byte packs of T, fp32 conversion,
// warp and block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace lmx::kernels::cuda::detail {

template <typename T>
__device__ __forceinline__ float to_f(T v) {
  return float(v);
}
template <typename T>
__device__ __forceinline__ T from_f(float v) {
  return T(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// N elements of T moved as one load/store (16 bytes when N = 16 / sizeof(T)).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ Pack<T, N> load(const T* p, size_t i) {
  return reinterpret_cast<const Pack<T, N>*>(p)[i];
}
template <typename T, int N>
__device__ __forceinline__ void store(T* p, size_t i, const Pack<T, N>& v) {
  reinterpret_cast<Pack<T, N>*>(p)[i] = v;
}

template <typename T>
constexpr int kVec = 16 / sizeof(T);

// The launch attribute (cudaLaunchKernelEx) that groups a grid's blocks into thread-block
// clusters of `x` along x (sm_90).
inline cudaLaunchAttribute cluster_attribute(unsigned x) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = x;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  return attribute;
}

// True when every pointer is 16-byte aligned and a row of `cols` T splits into 16-byte packs.
inline bool vec_ok(int cols, size_t elem, std::initializer_list<const void*> ptrs) {
  if ((size_t(cols) * elem) % 16 != 0) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// `op` (associative, commutative) over the warp's 32 values; every lane gets it.
template <typename Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  return warp_reduce(v, [](float a, float b) { return a + b; });
}

// `op` over the block (any blockDim.x that is a multiple of 32, up to 1024), `identity` its
// neutral value; every thread gets it. `scratch` is 33 floats of shared memory; safe to call
// repeatedly with the same scratch.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch, float identity, Op op) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : identity;
    v = warp_reduce(v, op);
    if (lane == 0) scratch[32] = v;
  }
  __syncthreads();
  return scratch[32];
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, 0.0f, [](float a, float b) { return a + b; });
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, -INFINITY, [](float a, float b) { return fmaxf(a, b); });
}

}  // namespace lmx::kernels::cuda::detail
