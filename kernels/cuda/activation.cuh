// The MLP activations as device functions, shared by the activation kernels
// (kernels/cuda/activation.cu) and the decode GEMV's gated-activation epilogue
// (kernels/cuda/gemv.cu). fp32 math with expf/erff/tanhf, not the fast intrinsics.
#pragma once

#include <type_traits>

#include "kernels/activation.h"

namespace lmx::kernels::cuda::detail {

template <ActivationKind K>
__device__ __forceinline__ float activate(float x) {
  if constexpr (K == ActivationKind::Silu) {
    return x / (1.0f + expf(-x));
  } else if constexpr (K == ActivationKind::GeluTanh) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  } else if constexpr (K == ActivationKind::GeluExact) {
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
  } else {
    return x > 0.0f ? x : 0.0f;
  }
}

// f(std::integral_constant<ActivationKind, K>{}) for the runtime `kind`: one template instance
// a kind, picked in one place (f is a generic lambda reading decltype(tag)::value).
template <typename F>
void with_activation(ActivationKind kind, F&& f) {
  using K = ActivationKind;
  switch (kind) {
    case K::Silu: f(std::integral_constant<K, K::Silu>{}); break;
    case K::GeluTanh: f(std::integral_constant<K, K::GeluTanh>{}); break;
    case K::GeluExact: f(std::integral_constant<K, K::GeluExact>{}); break;
    case K::Relu: f(std::integral_constant<K, K::Relu>{}); break;
  }
}

}  // namespace lmx::kernels::cuda::detail
