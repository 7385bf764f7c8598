// dynamic_int8 (weight-only int8, W8A16): symmetric int8 weights with fp32 scales, made at load
// time from an fp32 weight, and the linear that runs on them (docs/quantization.md).
//
// Quantization of a weight w [out, in] fp32 row-major (nn.Linear's layout) with group size g
// (g divides in; g = in is per output channel):
//   scales [out, in / g] fp32:  s[o, j] = max_{k in group j} |w[o, k]| / 127   (0 for an all-zero group)
//   values [out, in]     int8:  q[o, k] = clamp(round_half_even(w[o, k] / s[o, k / g]), -127, 127)
//                               (0 where s = 0); -128 is never used, so the range is symmetric.
//   dequant(W)[o, k] = q[o, k] * s[o, k / g]
// Rounding is half to even (std::nearbyint in the default rounding mode; the GPU's cvt.rni and
// torch.round do the same), so a GPU quantizer can reproduce these bytes exactly.
#pragma once

#include <cstdint>

namespace lmx::quant {

// The weights of one W8A16 projection as the linear takes them; host memory for the CPU
// reference, device memory for a CUDA kernel.
struct W8A16Weights {
  const int8_t* values = nullptr;  // [out, in]
  const float* scales = nullptr;   // [out, in / group]
  const float* bias = nullptr;     // [out] or null
  int out = 0, in = 0;
  int group = 0;  // input columns per scale; = in for per-channel
  int groups() const { return group > 0 ? in / group : 0; }
};

// Throws lmx::Error when `group` does not divide `in` (or is not positive) or a weight is not
// finite, naming `what` (the projection) and the sizes.
void check_int8_shape(const char* what, int64_t out, int64_t in, int64_t group);

namespace cpu {

// w [out, in] fp32 -> values [out, in] int8, scales [out, in / group] fp32, as above. `what`
// names the weight in errors (non-finite values, a group that does not divide `in`).
void quantize_int8(const char* what, const float* w, int64_t out, int64_t in, int64_t group,
                   int8_t* values, float* scales);

// dequant(W) [out, in] fp32 (tests, and a tied LM head's reference).
void dequantize_int8(const W8A16Weights& w, float* out);

// y [rows, w.out] = x [rows, w.in] · dequant(W)^T + w.bias (when not null): fp32 activations,
// fp32 accumulation (each group's int8 x fp32 dot product summed in fp32, times its scale, the
// groups summed in fp32), host memory; threads over output channels (OpenMP).
void w8a16_linear(const float* x, const W8A16Weights& w, float* y, int rows);

}  // namespace cpu
}  // namespace lmx::quant
