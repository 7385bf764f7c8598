// MLP activations.
//   gated_act: out[t, i] = act(in[t, i]) * in[t, inter + i]   in: [tokens, 2 * inter] (gate | up)
//   act:       out[t, i] = act(in[t, i])                       in: [tokens, inter]
// CPU: fp32, host memory; `act` and `gated_act` may run in place for the plain form.
#pragma once

namespace lmx::kernels {
enum class ActivationKind { Silu, GeluTanh, GeluExact, Relu };
}

namespace lmx::kernels::cpu {

void gated_act(ActivationKind kind, const float* in, float* out, int tokens, int inter);
void act(ActivationKind kind, const float* in, float* out, int tokens, int inter);

}  // namespace lmx::kernels::cpu
