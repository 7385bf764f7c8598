// The model description's activation as the kernels' enum (shared by every backend).
#pragma once

#include "engine/model/decoder_desc.h"
#include "kernels/activation.h"

namespace lmx {

inline kernels::ActivationKind to_kernel(Activation a) {
  switch (a) {
    case Activation::Silu: return kernels::ActivationKind::Silu;
    case Activation::GeluTanh: return kernels::ActivationKind::GeluTanh;
    case Activation::GeluExact: return kernels::ActivationKind::GeluExact;
    case Activation::Relu: return kernels::ActivationKind::Relu;
  }
  return kernels::ActivationKind::Silu;
}

}  // namespace lmx
