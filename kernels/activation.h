// MLP activations.
//   gated_act: out[t, i] = act(in[t, i]) * in[t, inter + i]   in: [tokens, 2 * inter] (gate | up)
//   act:       out[t, i] = act(in[t, i])                       in: [tokens, inter]
//   bias_gated_act / bias_act: the same with the up-projection's bias added first
//     (bias: [2 * inter] for the gated form (gate bias | up bias), [inter] for the plain form;
//     null = no bias).
// CPU: fp32, host memory; `act` and `gated_act` may run in place for the plain form.
// CUDA: T = float, __half or __nv_bfloat16, device memory; fp32 math (expf/erff/tanhf, not the
// fast intrinsics), one rounding per output; 16-byte loads when inter and the pointers allow.
// The plain form may run in place (out == in).
#pragma once

#include "kernels/stream.h"

namespace lmx::kernels {
enum class ActivationKind { Silu, GeluTanh, GeluExact, Relu };
}

namespace lmx::kernels::cpu {

void gated_act(ActivationKind kind, const float* in, float* out, int tokens, int inter);
void act(ActivationKind kind, const float* in, float* out, int tokens, int inter);
void bias_gated_act(ActivationKind kind, const float* in, const float* bias, float* out,
                    int tokens, int inter);
void bias_act(ActivationKind kind, const float* in, const float* bias, float* out, int tokens,
              int inter);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

template <typename T>
void gated_act(ActivationKind kind, const T* in, T* out, int tokens, int inter,
               cudaStream_t stream);
template <typename T>
void act(ActivationKind kind, const T* in, T* out, int tokens, int inter, cudaStream_t stream);
template <typename T>
void bias_gated_act(ActivationKind kind, const T* in, const T* bias, T* out, int tokens, int inter,
                    cudaStream_t stream);
template <typename T>
void bias_act(ActivationKind kind, const T* in, const T* bias, T* out, int tokens, int inter,
              cudaStream_t stream);

}  // namespace lmx::kernels::cuda
