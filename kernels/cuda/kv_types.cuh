// Element types of the paged KV cache on the GPU (kernels/kv_dtype.h): the compute type T
// (__half, __nv_bfloat16, float) or KvFp8 (E4M3 codes, one byte, with per-layer scales applied
// by the writers and readers: PagedKvLayout::scale, kernels/kv_dtype.h). Kernels that read
// or write the cache are templated on the cache type C next to T; these helpers convert.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

namespace lmx::kernels::cuda {

using KvFp8 = __nv_fp8_e4m3;

template <typename C>
constexpr bool kIsFp8 = std::is_same_v<C, KvFp8>;

// X(T, C) for each (compute type, cache type) pair a kernel over the cache is built for: the
// 16-bit types (tuned kernels), and with float too (generic kernels).
#define LMX_KV_CACHE_TYPES_16BIT(X) \
  X(__half, __half) X(__nv_bfloat16, __nv_bfloat16) X(__half, KvFp8) X(__nv_bfloat16, KvFp8)
#define LMX_KV_CACHE_TYPES(X) LMX_KV_CACHE_TYPES_16BIT(X) X(float, float) X(float, KvFp8)

// Two adjacent elements of C as one load, and their fp32 values (from_float2: the reverse, for
// outputs of T).
template <typename C>
struct Vec2;
template <>
struct Vec2<__half> {
  using type = __half2;
  static __device__ __forceinline__ float2 to_float2(type v) { return __half22float2(v); }
  static __device__ __forceinline__ type from_float2(float2 v) { return __float22half2_rn(v); }
};
template <>
struct Vec2<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static __device__ __forceinline__ float2 to_float2(type v) { return __bfloat1622float2(v); }
  static __device__ __forceinline__ type from_float2(float2 v) { return __float22bfloat162_rn(v); }
};
template <>
struct Vec2<KvFp8> {
  using type = __nv_fp8x2_e4m3;
  static __device__ __forceinline__ float2 to_float2(type v) {
    return static_cast<float2>(v);  // exact
  }
};

// Writers store a value in the cache with detail::to_cache<C> (kernels/cuda/paged_kv.cuh): x /
// scale through from_f<C>, which for KvFp8 rounds to nearest even and saturates to +-448
// (cvt.rn.satfinite.e4m3x2.f32).

// 8 fp8 values (8 bytes) widened to 8 T (16 bytes), exactly (every E4M3 value is an fp16 and a
// bf16 value).
template <typename T>
__device__ __forceinline__ uint4 widen_fp8x8(uint2 raw) {
  const __nv_fp8x2_e4m3* in = reinterpret_cast<const __nv_fp8x2_e4m3*>(&raw);
  uint4 out;
  uint32_t* o = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, __half>) {
      const __half2 h(in[i]);
      o[i] = *reinterpret_cast<const uint32_t*>(&h);
    } else {
      const __nv_bfloat162 b = __float22bfloat162_rn(static_cast<float2>(in[i]));
      o[i] = *reinterpret_cast<const uint32_t*>(&b);
    }
  }
  return out;
}

}  // namespace lmx::kernels::cuda
