// One projection's parameters as the GEMM kernels take them:
//   y[M, out] = x[M, in] · W^T (+ bias).
// W is `weight` ([out, in] row-major, nn.Linear's layout, in the compute type T), or, for a
// dynamic_int8 projection (quant/int8.h, per output channel), the int8 values `q` [out, in] with
// one fp32 scale a row `q_scale` [out]: W[o, k] = q[o, k] * q_scale[o]; for an fp8 projection
// (quant/fp8.h) `q` holds E4M3 codes instead (`e4m3`): W[o, k] = e4m3(q[o, k]) * q_scale[o].
// Grouped scales (`group` > 0: dynamic_int8 with option.quantize_group_size, a block-scaled fp8
// checkpoint): q_scale is [out, in / group], one scale a row per `group` input columns:
// W[o, k] = value(q[o, k]) * q_scale[o * (in / group) + k / group]; group divides in.
// bias: [out] or null. Host
// memory for the CPU kernels, device memory for the CUDA ones. The model-level Linear
// (engine/model/linear.h) hands its kernels this view.
#pragma once

#include <cstdint>

namespace lmx::kernels {

template <typename T>
struct LinearWeights {
  const T* weight = nullptr;
  const T* bias = nullptr;
  int out = 0, in = 0;
  const int8_t* q = nullptr;       // int8 weights [out, in] (weight is then null)
  const float* q_scale = nullptr;  // [out]
  bool e4m3 = false;               // q holds E4M3 codes (bytes), not int8 values
  int group = 0;                   // input columns a scale covers; 0: one scale a row
  bool quantized() const { return q != nullptr; }  // one byte an element with scales, not T
  bool int8() const { return q != nullptr && !e4m3; }
  bool fp8() const { return q != nullptr && e4m3; }
  bool grouped() const { return q != nullptr && group > 0 && group < in; }
  LinearWeights without_bias() const { return {weight, nullptr, out, in, q, q_scale, e4m3, group}; }
};

// Grouped scales the CUDA one-byte kernels (the decode GEMV, kernels/gemm.h; the W8A16 GEMM,
// kernels/byte_weight_gemm.h) can apply: they scale each 64-k step of a row once, so a group is a
// multiple of kScaleGroupStep input columns and divides K. Others are refused.
inline constexpr int kScaleGroupStep = 64;
inline bool scale_groups_supported(int group, int K) {
  return group > 0 && group % kScaleGroupStep == 0 && K % group == 0;
}

}  // namespace lmx::kernels
