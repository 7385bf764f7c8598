// Fills device memory with pseudo-random values in GPU memory (benchmark weights: no host copy).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lmx::cuda_init {

// out[i] = mean + std * N(0, 1)-like hashed value of (seed, i); T = float, __half, __nv_bfloat16.
template <typename T>
void fill_random(T* out, size_t n, uint64_t seed, float mean, float std);

}  // namespace lmx::cuda_init
