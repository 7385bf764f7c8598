#include "engine/parallel/peer_all_reduce_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace lmx::peer {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// 16 bytes of T as fp32 and back.
template <typename T>
struct Pack;
template <>
struct Pack<float> {
  static constexpr int n = 4;
  static __device__ void add(float* acc, uint4 v) {
    const float* f = reinterpret_cast<const float*>(&v);
    for (int i = 0; i < n; ++i) acc[i] += f[i];
  }
  static __device__ uint4 store(const float* acc) {
    uint4 v;
    float* f = reinterpret_cast<float*>(&v);
    for (int i = 0; i < n; ++i) f[i] = acc[i];
    return v;
  }
};
template <>
struct Pack<__half> {
  static constexpr int n = 8;
  static __device__ void add(float* acc, uint4 v) {
    const __half* h = reinterpret_cast<const __half*>(&v);
    for (int i = 0; i < n; ++i) acc[i] += __half2float(h[i]);
  }
  static __device__ uint4 store(const float* acc) {
    uint4 v;
    __half* h = reinterpret_cast<__half*>(&v);
    for (int i = 0; i < n; ++i) h[i] = __float2half_rn(acc[i]);
    return v;
  }
};
template <>
struct Pack<__nv_bfloat16> {
  static constexpr int n = 8;
  static __device__ void add(float* acc, uint4 v) {
    const __nv_bfloat16* h = reinterpret_cast<const __nv_bfloat16*>(&v);
    for (int i = 0; i < n; ++i) acc[i] += __bfloat162float(h[i]);
  }
  static __device__ uint4 store(const float* acc) {
    uint4 v;
    __nv_bfloat16* h = reinterpret_cast<__nv_bfloat16*>(&v);
    for (int i = 0; i < n; ++i) h[i] = __float2bfloat16_rn(acc[i]);
    return v;
  }
};

// data [vecs] of 16-byte vectors; grid: the same on every rank (a function of vecs alone).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(PeerBuffers buffers, int rank, int ranks, uint4* data, size_t vecs) {
  __shared__ uint32_t call_shared;
  Signals* mine = buffers.signals[rank];
  const int b = blockIdx.x;
  if (threadIdx.x == 0) call_shared = mine->calls[b] + 1;
  __syncthreads();
  const uint32_t call = call_shared;
  const size_t half = (call & 1) * buffers.half_bytes;
  const size_t stride = size_t(gridDim.x) * kThreads;
  const size_t first = size_t(b) * kThreads + threadIdx.x;

  uint4* staged = reinterpret_cast<uint4*>(buffers.staging[rank] + half);
  for (size_t i = first; i < vecs; i += stride) staged[i] = data[i];

  // Announce this block's copy to every peer, then wait for theirs. The barrier orders the
  // block's copies before the flag; the system-scope fence and release make them visible to the
  // peer that acquires the flag. Flags only grow (a fast peer may already have announced the next
  // call), hence the signed difference.
  __syncthreads();
  const int p = threadIdx.x;
  if (p < ranks && p != rank) {
    __threadfence_system();
    store_release(&buffers.signals[p]->flag[b][rank], call);
    while (int32_t(load_acquire(&mine->flag[b][p]) - call) < 0) {
    }
  }
  __syncthreads();

  for (size_t i = first; i < vecs; i += stride) {
    float acc[Pack<T>::n] = {};
    for (int q = 0; q < ranks; ++q)
      Pack<T>::add(acc, __ldcg(reinterpret_cast<const uint4*>(buffers.staging[q] + half) + i));
    data[i] = Pack<T>::store(acc);
  }

  // Every slot counts every call, so a later call with more blocks reads the right count.
  if (threadIdx.x == 0)
    for (int s = b; s < kMaxBlocks; s += gridDim.x) mine->calls[s] = call;
}

}  // namespace

cudaError_t one_shot_sum(const PeerBuffers& buffers, int rank, int ranks, void* data, size_t bytes,
                         DeviceDtype dtype, cudaStream_t stream) {
  if (ranks < 2 || ranks > kMaxRanks || rank < 0 || rank >= ranks || bytes % 16 != 0 ||
      bytes > buffers.half_bytes || reinterpret_cast<uintptr_t>(data) % 16 != 0)
    return cudaErrorInvalidValue;
  const size_t vecs = bytes / 16;
  if (vecs == 0) return cudaSuccess;
  const int blocks = int(std::min<size_t>(kMaxBlocks, (vecs + kThreads - 1) / kThreads));
  auto* d = static_cast<uint4*>(data);
  switch (dtype) {
    case DeviceDtype::F32:
      one_shot_kernel<float><<<blocks, kThreads, 0, stream>>>(buffers, rank, ranks, d, vecs);
      break;
    case DeviceDtype::F16:
      one_shot_kernel<__half><<<blocks, kThreads, 0, stream>>>(buffers, rank, ranks, d, vecs);
      break;
    case DeviceDtype::BF16:
      one_shot_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(buffers, rank, ranks, d, vecs);
      break;
  }
  return cudaGetLastError();
}

}  // namespace lmx::peer
