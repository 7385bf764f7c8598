// One-byte weights (dynamic_int8's and smoothquant's int8 values, stored in kernels/int8_layout.h's
// order; fp8's E4M3 codes, in column order) widened to 16-bit mma fragments in registers, exactly (every int8 value and every E4M3 value is an fp16
// and a bf16 value): the decode GEMV (gemv.cu) and the byte-weight GEMM's kernels
// (byte_weight_mma.cu, byte_weight_wgmma.cu) read one byte a weight from memory and feed the
// tensor cores T. W = int8_t or KvFp8.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/mma.cuh"

namespace lmx::kernels::cuda {

// Two int8 weights (bytes 2i, 2i + 1 of `word`) as one fragment register of T, exactly.
//   __half: the byte plus 128 (sign bit flipped) as the mantissa of 1024.0 (0x64xx), minus 1152.
//   bf16: too few mantissa bits for that; each byte through the same trick in fp32 (2^23), then
//   packed (exact: |q| <= 127 has 7 significant bits).
template <typename T>
__device__ __forceinline__ uint32_t int8_pair(uint32_t word, int i) {
  const uint32_t u = word ^ 0x80808080u;  // each byte: q + 128
  if constexpr (std::is_same_v<T, __half>) {
    const uint32_t biased = __byte_perm(u, 0x64646464u, i == 0 ? 0x5140u : 0x5342u);
    const __half2 v = __hsub2(*reinterpret_cast<const __half2*>(&biased),
                              __half2half2(__ushort_as_half(0x6480)));
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const float lo =
        __uint_as_float(__byte_perm(u, 0x4B000000u, i == 0 ? 0x7440u : 0x7442u)) - 8388736.0f;
    const float hi =
        __uint_as_float(__byte_perm(u, 0x4B000000u, i == 0 ? 0x7441u : 0x7443u)) - 8388736.0f;
    return pack2<T>(lo, hi);
  }
}

// Four weights (the bytes of `word`) as 4 T: .x bytes 0 and 1, .y bytes 2 and 3 (two fragment
// registers).
template <typename T, typename W>
__device__ __forceinline__ uint2 widen_bytes4(uint32_t word) {
  static_assert(std::is_same_v<W, int8_t> || std::is_same_v<W, KvFp8>);
  if constexpr (std::is_same_v<W, int8_t>) {
    return make_uint2(int8_pair<T>(word, 0), int8_pair<T>(word, 1));
  } else {
    const uint4 wide = widen_fp8x8<T>(make_uint2(word, 0u));
    return make_uint2(wide.x, wide.y);
  }
}

// Eight weights (8 bytes: words lo, hi) as 8 T (one 16-byte fragment chunk), in order.
template <typename T, typename W>
__device__ __forceinline__ uint4 widen_bytes8(uint32_t lo, uint32_t hi) {
  const uint2 first = widen_bytes4<T, W>(lo), second = widen_bytes4<T, W>(hi);
  return make_uint4(first.x, first.y, second.x, second.y);
}

// A chunk of 16 weights (k 0..15 of the chunk) as two chunks of 8 T: k 0..7 and k 8..15.
template <typename T, typename W>
__device__ __forceinline__ void widen_bytes16(const uint4& q, uint4& first, uint4& second) {
  first = widen_bytes8<T, W>(q.x, q.y);
  second = widen_bytes8<T, W>(q.z, q.w);
}

// x's two 8-k chunks of a 16-k group (k 0..7 and 8..15, T) paired with that group's widened
// weights (widen_bytes16's first and second, or widen_bytes8 of its low and high 8 bytes), for the
// kernels that feed the tensor cores x from registers: int8 weights are stored in
// kernels/int8_layout.h's order (stored pairs 0..3 are k pairs 0, 4, 1, 5 of the group, 4..7 are
// 2, 6, 3, 7), E4M3 codes in column order.
template <typename W>
struct XInWeightOrder {
  uint4 first, second;
  __device__ __forceinline__ XInWeightOrder(const uint4& k0, const uint4& k8) {
    if constexpr (std::is_same_v<W, int8_t>) {
      first = make_uint4(k0.x, k8.x, k0.y, k8.y);
      second = make_uint4(k0.z, k8.z, k0.w, k8.w);
    } else {
      first = k0;
      second = k8;
    }
  }
};

// The same from shared memory, half a group at a time: x's 8 k (as 16 bytes of T) that meet bytes
// 8h .. 8h + 7 of a lane's 16 weight bytes of a 16-k group, from the group's x chunks (k 0..7 at
// `k0`, 8..15 at `k8`, 16-byte aligned): for E4M3 chunk h, for int8 the halves h of both.
template <typename W>
__device__ __forceinline__ uint4 x_for_weight_half(const unsigned char* k0, const unsigned char* k8,
                                                   int h) {
  if constexpr (std::is_same_v<W, int8_t>) {
    const uint2 a = *reinterpret_cast<const uint2*>(k0 + 8 * h);
    const uint2 b = *reinterpret_cast<const uint2*>(k8 + 8 * h);
    return make_uint4(a.x, b.x, a.y, b.y);
  } else {
    return *reinterpret_cast<const uint4*>(h ? k8 : k0);
  }
}

}  // namespace lmx::kernels::cuda
