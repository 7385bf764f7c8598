#include "kernels/activation.h"

#include <array>
#include <cmath>

namespace lmx::kernels::cpu {
namespace {

inline float apply(ActivationKind kind, float x) {
  switch (kind) {
    case ActivationKind::Silu:
      return x / (1.0f + std::exp(-x));
    case ActivationKind::GeluTanh:  // gelu_new / gelu_pytorch_tanh
      return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case ActivationKind::GeluExact:
      return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
    case ActivationKind::Relu:
      return x > 0.0f ? x : 0.0f;
  }
  return x;
}

}  // namespace

void gated_act(ActivationKind kind, const float* in, float* out, int tokens, int inter) {
#pragma omp parallel for schedule(static) if (tokens > 8)
  for (int t = 0; t < tokens; ++t) {
    const float* gate = in + size_t(t) * 2 * inter;
    const float* up = gate + inter;
    float* o = out + size_t(t) * inter;
    for (int i = 0; i < inter; ++i) o[i] = apply(kind, gate[i]) * up[i];
  }
}

void act(ActivationKind kind, const float* in, float* out, int tokens, int inter) {
  const size_t n = size_t(tokens) * inter;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; ++i) out[i] = apply(kind, in[i]);
}

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cpu {

void bias_gated_act(ActivationKind kind, const float* in, const float* bias, float* out,
                    int tokens, int inter) {
  for (int t = 0; t < tokens; ++t) {
    const float* gate = in + size_t(t) * 2 * inter;
    const float* up = gate + inter;
    float* o = out + size_t(t) * inter;
    for (int i = 0; i < inter; ++i) {
      const float g = gate[i] + (bias ? bias[i] : 0.0f);
      const float u = up[i] + (bias ? bias[inter + i] : 0.0f);
      gated_act(kind, std::array<float, 2>{g, u}.data(), o + i, 1, 1);
    }
  }
}

void bias_act(ActivationKind kind, const float* in, const float* bias, float* out, int tokens,
              int inter) {
  for (int t = 0; t < tokens; ++t)
    for (int i = 0; i < inter; ++i) {
      const float v = in[size_t(t) * inter + i] + (bias ? bias[i] : 0.0f);
      act(kind, &v, out + size_t(t) * inter + i, 1, 1);
    }
}

}  // namespace lmx::kernels::cpu
