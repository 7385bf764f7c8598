// The fp8 KV cache's conversions on the GPU (kernels/cuda/kv_types.cuh, what the rope / K/V-write
// kernels and the attention kernels use) against the CPU reference's emulation
// (kernels/kv_dtype.h): the encoding of EVERY fp32 bit pattern (2^32, in chunks), and the value of
// every one of the 256 codes. Bit-exact: the CPU backend's fp8 cache must hold exactly what the
// GPU's decodes to.
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/kv_dtype.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

namespace kc = kernels::cuda;

__global__ void encode_all(uint32_t first_bits, uint32_t n, uint8_t* codes) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const kc::KvFp8 c = kc::detail::from_f<kc::KvFp8>(__uint_as_float(first_bits + i));
  codes[i] = reinterpret_cast<const uint8_t&>(c);
}

__global__ void decode_all(float* values) {  // 128 threads, two codes each
  const int i = threadIdx.x;
  const uint16_t pair = uint16_t(2 * i) | uint16_t((2 * i + 1) << 8);
  const float2 v = kc::Vec2<kc::KvFp8>::to_float2(reinterpret_cast<const __nv_fp8x2_e4m3&>(pair));
  values[2 * i] = v.x;
  values[2 * i + 1] = v.y;
}

// CPU encodings of bits first .. first + codes.size() - 1 that differ from `codes`, on every core.
unsigned long long count_mismatches(uint32_t first, const std::vector<uint8_t>& codes) {
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned long long> bad(workers, 0);
  std::vector<std::thread> pool;
  const size_t per = (codes.size() + workers - 1) / workers;
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (size_t i = w * per; i < std::min(codes.size(), (w + 1) * per); ++i) {
        const uint32_t bits = first + uint32_t(i);
        float x;
        std::memcpy(&x, &bits, 4);
        bad[w] += kernels::cpu::encode_e4m3(x) != codes[i];
      }
    });
  for (std::thread& t : pool) t.join();
  unsigned long long total = 0;
  for (unsigned long long b : bad) total += b;
  return total;
}

TEST(KvFp8Cuda, EncodeMatchesCpuOnEveryFloat) {
  LMX_REQUIRE_GPU();
  constexpr uint32_t kChunk = 1u << 28;
  test::Dev<uint8_t> codes(kChunk);
  ASSERT_TRUE(codes.p);
  std::vector<uint8_t> got(kChunk);
  unsigned long long mismatches = 0;
  uint32_t first_bad = 0;
  for (uint64_t first = 0; first < (1ull << 32); first += kChunk) {
    encode_all<<<kChunk / 256, 256>>>(uint32_t(first), kChunk, codes.p);
    LMX_CUDA_OK(cudaMemcpy(got.data(), codes.p, kChunk, cudaMemcpyDeviceToHost));
    const unsigned long long bad = count_mismatches(uint32_t(first), got);
    if (bad && !mismatches)
      for (uint32_t i = 0; i < kChunk; ++i) {
        const uint32_t bits = uint32_t(first) + i;
        float x;
        std::memcpy(&x, &bits, 4);
        if (kernels::cpu::encode_e4m3(x) != got[i]) {
          first_bad = bits;
          break;
        }
      }
    mismatches += bad;
  }
  EXPECT_EQ(mismatches, 0u) << "first mismatching fp32 bits 0x" << std::hex << first_bad;
}

TEST(KvFp8Cuda, DecodeMatchesCpuOnEveryCode) {
  LMX_REQUIRE_GPU();
  test::Dev<float> values(256);
  decode_all<<<1, 128>>>(values.p);
  LMX_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = values.download_f();
  for (int c = 0; c < 256; ++c) {
    const float want = kernels::cpu::decode_e4m3(uint8_t(c));
    if (want != want)
      EXPECT_NE(got[size_t(c)], got[size_t(c)]) << "code " << c << " must decode to NaN";
    else
      EXPECT_EQ(std::memcmp(&got[size_t(c)], &want, 4), 0)
          << "code " << c << ": GPU " << got[size_t(c)] << ", CPU " << want;
  }
}

}  // namespace
}  // namespace lmx
