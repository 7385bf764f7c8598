// Launch-time dispatch shared by the attention kernels (attention_decode.cu, attention_prefill.cu,
// attention_generic.cu): the runtime head_dim onto the dims the tuned kernels are compiled for
// (kernels/attention.h: tuned_attention_head_dim), and ALiBi on or off onto a template bool, so
// the kernels without ALiBi carry no bias code or registers.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

namespace lmx::kernels::cuda {

// Calls fn(std::integral_constant<int, D>{}) for head_dim == D, or throws naming the kernel and
// the supported dims.
template <typename Fn>
void dispatch_head_dim(int head_dim, const char* kernel, Fn&& fn) {
  switch (head_dim) {
    case 64: return fn(std::integral_constant<int, 64>{});
    case 80: return fn(std::integral_constant<int, 80>{});
    case 96: return fn(std::integral_constant<int, 96>{});
    case 128: return fn(std::integral_constant<int, 128>{});
    case 256:
      return fn(std::integral_constant<int, 256>{});
    default:
      throw std::invalid_argument(std::string(kernel) + ": head_dim " + std::to_string(head_dim) +
                                  " not supported (64, 80, 96, 128, 256)");
  }
}

// Calls fn(std::bool_constant<alibi_slopes != nullptr>{}).
template <typename Fn>
void dispatch_alibi(const float* alibi_slopes, Fn&& fn) {
  if (alibi_slopes != nullptr) return fn(std::true_type{});
  return fn(std::false_type{});
}

// ALiBi bias of key position p for a query at position pos: slope * (p - pos) <= 0, fp32. The
// kernels that run the softmax in the log2 domain pass slope * log2(e).
__device__ __forceinline__ float alibi_bias(float slope, int p, int pos) {
  return slope * float(p - pos);
}

}  // namespace lmx::kernels::cuda
