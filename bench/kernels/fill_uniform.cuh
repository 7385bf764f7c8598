// Random operands for the kernel microbenchmarks, made in GPU memory.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "bench/kernels/cuda_check.h"

namespace lmx::bench {

// Uniform values in [-1, 1) from a hash of the index, times `scale` (int8: scale 127 gives every
// code in [-127, 127)); random values, not constants, which draw less power and run faster.
template <typename T>
__global__ void fill_uniform(T* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed ^ uint32_t(i >> 32) * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    h *= 3266489917u;
    h ^= h >> 16;
    p[i] = T(scale * (float(h) * (2.0f / 4294967296.0f) - 1.0f));
  }
}

template <typename T>
T* alloc_random(size_t n, uint32_t seed, cudaStream_t stream = nullptr, float scale = 1.0f) {
  T* p = nullptr;
  CHECK(cudaMalloc(&p, n * sizeof(T)));
  fill_uniform<T><<<1024, 256, 0, stream>>>(p, n, seed, scale);
  CHECK(cudaGetLastError());
  return p;
}

// p[i] = to wherever p[i] == from (e.g. NaN codes out of random E4M3 bytes).
template <typename T>
__global__ void replace_value(T* p, size_t n, T from, T to) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    if (p[i] == from) p[i] = to;
}

template <typename T>
void replace_byte(T* p, size_t n, T from, T to, cudaStream_t stream = nullptr) {
  static_assert(sizeof(T) == 1);
  replace_value<T><<<1024, 256, 0, stream>>>(p, n, from, to);
  CHECK(cudaGetLastError());
}

}  // namespace lmx::bench
