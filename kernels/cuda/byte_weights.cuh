// One-byte weights (dynamic_int8's and smoothquant's int8 values, stored in kernels/int8_layout.h's
// order; fp8's E4M3 codes, in column order) widened to 16-bit mma fragments in registers, exactly
// (every int8 value and every E4M3 value is an fp16 and a bf16 value): the decode GEMV (gemv.cu)
// and the byte-weight GEMM's kernels (byte_weight_mma.cu, byte_weight_wgmma.cu) read one byte a
// weight from memory and feed the tensor cores T. W = int8_t or KvFp8.
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
    const __half2 v =
        __hsub2(*reinterpret_cast<const __half2*>(&biased), __half2half2(__ushort_as_half(0x6480)));
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
// registers; an int8 layout word: k 2t, 2t + 1 and 2t + 8, 2t + 9 of its group).
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

// Half of a stored group of 16 weights (the 16 bytes q: int8 in kernels/int8_layout.h's order,
// word j holding k 2j, 2j + 1, 2j + 8, 2j + 9; E4M3 in column order) as 8 T of k 8h .. 8h + 7,
// in column order: int8's k pairs of half h are the halves h of the four words.
template <typename T, typename W>
__device__ __forceinline__ uint4 widen_group_half(const uint4& q, int h) {
  if constexpr (std::is_same_v<W, int8_t>) {
    return make_uint4(int8_pair<T>(q.x, h), int8_pair<T>(q.y, h), int8_pair<T>(q.z, h),
                      int8_pair<T>(q.w, h));
  } else {
    const uint2 first = widen_bytes4<T, W>(h ? q.z : q.x),
                second = widen_bytes4<T, W>(h ? q.w : q.y);
    return make_uint4(first.x, first.y, second.x, second.y);
  }
}

// A stored group of 16 weights as two chunks of 8 T: k 0..7 and k 8..15.
template <typename T, typename W>
__device__ __forceinline__ void widen_bytes16(const uint4& q, uint4& first, uint4& second) {
  first = widen_group_half<T, W>(q, 0);
  second = widen_group_half<T, W>(q, 1);
}

}  // namespace lmx::kernels::cuda
