// Calls fn(std::integral_constant<int, D>{}) for the runtime head_dim D the tuned attention
// kernels are compiled for (kernels/attention.h: tuned_attention_head_dim), or throws naming the
// kernel and the supported dims.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

namespace lmx::kernels::cuda {

template <typename Fn>
void dispatch_head_dim(int head_dim, const char* kernel, Fn&& fn) {
  switch (head_dim) {
    case 64: return fn(std::integral_constant<int, 64>{});
    case 80: return fn(std::integral_constant<int, 80>{});
    case 96: return fn(std::integral_constant<int, 96>{});
    case 128: return fn(std::integral_constant<int, 128>{});
    default:
      throw std::invalid_argument(std::string(kernel) + ": head_dim " + std::to_string(head_dim) +
                                  " not supported (64, 80, 96, 128)");
  }
}

}  // namespace lmx::kernels::cuda
