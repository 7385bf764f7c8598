// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator, so the GPU sampler's draw for (seed, step, token index) is a pure
// function of those numbers and a replayed step (CUDA graph, preemption) draws the same token.
// Host and device (the CPU sampling reference uses the same stream).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LMX_HD __host__ __device__ __forceinline__
#else
#define LMX_HD inline
#endif

namespace lmx::kernels {

struct Philox4 {
  uint32_t v[4];
};

LMX_HD uint32_t philox_mulhi(uint32_t a, uint32_t b) {
  return uint32_t((uint64_t(a) * b) >> 32);
}

LMX_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                             uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    const uint32_t hi0 = philox_mulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = philox_mulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in (0, 1): 24 random bits, centred in their interval (never 0 or 1).
LMX_HD float philox_uniform(uint32_t bits) {
  return (float(bits >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

// The uniform for element `index` of the row drawn at (seed, step).
LMX_HD float philox_uniform_at(uint64_t seed, uint64_t step, uint32_t index) {
  const Philox4 r = philox4x32_10(index / 4, uint32_t(step), uint32_t(step >> 32), 0x4C4D5853u,
                                  uint32_t(seed), uint32_t(seed >> 32));
  return philox_uniform(r.v[index % 4]);
}

}  // namespace lmx::kernels

#undef LMX_HD
