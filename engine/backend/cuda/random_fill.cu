#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/backend/cuda/random_fill.h"

namespace lmx::cuda_init {
namespace {

// Counter-based hash -> approximately normal value (sum of 4 uniforms, variance-corrected).
__device__ float hashed_normal(uint64_t seed, uint64_t i) {
  float sum = 0.0f;
  for (int k = 0; k < 4; ++k) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + (i * 4 + k) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    sum += float(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
  }
  return (sum - 2.0f) * 1.7320508f;  // mean 0, variance 1
}

template <typename T>
__global__ void fill_random_kernel(T* out, size_t n, uint64_t seed, float mean, float std) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = T(mean + std * hashed_normal(seed, i));
}

}  // namespace

template <typename T>
void fill_random(T* out, size_t n, uint64_t seed, float mean, float std) {
  fill_random_kernel<T><<<1024, 256>>>(out, n, seed, mean, std);
}

template void fill_random<float>(float*, size_t, uint64_t, float, float);
template void fill_random<__half>(__half*, size_t, uint64_t, float, float);
template void fill_random<__nv_bfloat16>(__nv_bfloat16*, size_t, uint64_t, float, float);

}  // namespace lmx::cuda_init
