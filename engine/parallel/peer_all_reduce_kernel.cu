#include "engine/parallel/peer_all_reduce_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"

namespace lmx::peer {
namespace {

namespace pdl = kernels::cuda::pdl;

constexpr int kThreads = 256;

constexpr uint32_t kEmpty = 0xFFFFFFFFu;  // a NaN pattern in fp32, fp16 and bf16 alike

__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

__device__ __forceinline__ void store_volatile(uint4* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ bool has_empty(uint4 v) {
  return v.x == kEmpty || v.y == kEmpty || v.z == kEmpty || v.w == kEmpty;
}

// v with any word equal to the empty pattern (a NaN) replaced by another NaN: what is pushed, and
// what a rank adds of its own data, so every rank sums the same values.
__device__ __forceinline__ uint4 sendable(uint4 v) {
  constexpr uint32_t kNan = 0x7FFFFFFFu;  // NaN in fp32, and two NaNs in fp16 / bf16
  v.x = v.x == kEmpty ? kNan : v.x;
  v.y = v.y == kEmpty ? kNan : v.y;
  v.z = v.z == kEmpty ? kNan : v.z;
  v.w = v.w == kEmpty ? kNan : v.w;
  return v;
}

// 16 bytes of T as fp32 and back (the kernels' conversions: kernels/cuda/common.cuh).
template <typename T>
struct Pack {
  static constexpr int n = 16 / sizeof(T);
  static __device__ void add(float* acc, uint4 v) {
    const T* x = reinterpret_cast<const T*>(&v);
    for (int i = 0; i < n; ++i) acc[i] += kernels::cuda::detail::to_f(x[i]);
  }
  static __device__ uint4 store(const float* acc) {
    uint4 v;
    T* x = reinterpret_cast<T*>(&v);
    for (int i = 0; i < n; ++i) x[i] = kernels::cuda::detail::from_f<T>(acc[i]);
    return v;
  }
};

// data [vecs] of 16-byte vectors. Block b pushes and sums the elements b * kThreads + thread +
// k * gridDim.x * kThreads; its call count is slot b of the rank's counts.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(PeerBuffers buffers, int rank, int ranks, uint4* data, size_t vecs) {
  __shared__ uint32_t call_shared;
  const int b = blockIdx.x;
  // The kernel before may be the previous call, which writes the counts at its end: read them
  // (and `data`) only once it has completed.
  pdl::wait_for_primary();
  pdl::allow_dependents();
  if (threadIdx.x == 0) call_shared = buffers.calls[rank][b] + 1;
  __syncthreads();
  const uint32_t call = call_shared;
  const size_t slot_vecs = buffers.half_bytes / 16;
  // Slot `from` of half (call & 1) in `owner`'s buffer.
  auto slot = [&](int owner, int from) {
    return reinterpret_cast<uint4*>(buffers.receive[owner]) +
           (size_t(call & 1) * size_t(ranks) + size_t(from)) * slot_vecs;
  };
  const size_t stride = size_t(gridDim.x) * kThreads;
  const size_t first = size_t(b) * kThreads + threadIdx.x;

  for (size_t i = first; i < vecs; i += stride) {
    const uint4 v = sendable(data[i]);
    for (int p = 0; p < ranks; ++p)
      if (p != rank) store_volatile(slot(p, rank) + i, v);
  }
  const uint4 empty = make_uint4(kEmpty, kEmpty, kEmpty, kEmpty);
  for (size_t i = first; i < vecs; i += stride) {
    float acc[Pack<T>::n] = {};
    for (int q = 0; q < ranks; ++q) {
      uint4 v;
      if (q == rank) {
        v = sendable(data[i]);
      } else {
        uint4* cell = slot(rank, q) + i;
        do {
          v = load_volatile(cell);
        } while (has_empty(v));
        *cell = empty;  // ready for call + 2
      }
      Pack<T>::add(acc, v);
    }
    data[i] = Pack<T>::store(acc);
  }

  // Every slot counts every call, so a later call with more blocks reads the right count.
  if (threadIdx.x == 0)
    for (int s = b; s < kMaxBlocks; s += gridDim.x) buffers.calls[rank][s] = call;
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
  auto launch = [&](auto kernel) {
    pdl::launch_dependent(kernel, blocks, kThreads, 0, stream, buffers, rank, ranks, d, vecs);
  };
  switch (dtype) {
    case DeviceDtype::F32:
      launch(one_shot_kernel<float>);
      break;
    case DeviceDtype::F16:
      launch(one_shot_kernel<__half>);
      break;
    case DeviceDtype::BF16:
      launch(one_shot_kernel<__nv_bfloat16>);
      break;
  }
  return cudaGetLastError();
}

}  // namespace lmx::peer
