// The rotate-half rotary of one pair (kernels/rotary.h), shared by the rope + K/V write kernel
// and the decode qkv projection's epilogue so that both round the same way.
#pragma once

#include <cuda_runtime.h>

namespace lmx::kernels::cuda::detail {

// (sin, cos) of the rotary angle pos * inv_freq, in fp32.
__device__ __forceinline__ float2 rotary_sincos(float pos, float inv_freq) {
  float2 sc;
  sincosf(pos * inv_freq, &sc.x, &sc.y);
  return sc;
}

// (a, b) = (x[i], x[i + rotary_dim / 2]) rotated by the angle whose (sin, cos) is sc:
// (a cos - b sin, b cos + a sin).
__device__ __forceinline__ float2 rotate_pair(float a, float b, float2 sc) {
  return make_float2(a * sc.y - b * sc.x, b * sc.y + a * sc.x);
}

}  // namespace lmx::kernels::cuda::detail
