// RMSNorm and LayerNorm of a row a block holds in registers, shared by the norm kernels
// (kernels/cuda/norm.cu) and the row quantizer's pre-norm source (kernels/cuda/quantize.cu), so
// that both compute the same values bit for bit when their threads hold the same pieces of the
// row: every thread visits its values in the same order, the sums are fp32, block-reduced.
#pragma once

#include "kernels/cuda/common.cuh"

namespace lmx::kernels::cuda::detail {

// A row's norm factors {mean (0 for RMSNorm), r}: r = 1 / sqrt(mean(x^2) + eps) (RMSNorm) or
// 1 / sqrt(var + eps) with the biased variance taken around the mean in a second pass (LayerNorm:
// no cancellation). for_each(f) calls f(x) for each of this thread's values of the row; every
// thread of the block calls this (block reductions through `scratch`, 33 floats of shared
// memory).
template <typename ForEach>
__device__ __forceinline__ float2 norm_factors(bool layer_norm, ForEach for_each, int cols,
                                               float eps, float* scratch) {
  float sum = 0.0f;
  for_each([&](float x) { sum += layer_norm ? x : x * x; });
  if (!layer_norm) return make_float2(0.0f, rsqrtf(block_sum(sum, scratch) / float(cols) + eps));
  const float mean = block_sum(sum, scratch) / float(cols);
  float var = 0.0f;
  for_each([&](float x) { var += (x - mean) * (x - mean); });
  return make_float2(mean, rsqrtf(block_sum(var, scratch) / float(cols) + eps));
}

// One normalized value from its factors f (norm_factors), weight w and bias b (LayerNorm).
__device__ __forceinline__ float normalized(bool layer_norm, float x, float2 f, float w, float b) {
  return layer_norm ? (x - f.x) * f.y * w + b : w * (x * f.y);
}

}  // namespace lmx::kernels::cuda::detail
