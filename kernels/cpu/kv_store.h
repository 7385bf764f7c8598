// One row of K or V into the fp32 CPU cache, as the cache's storage dtype holds it (write_kv and
// rope_write_kv share it). scale: the row's fp8 dequantization scale (PagedKvLayout::scale);
// the model dtype stores the values as they are.
#pragma once

#include <cstddef>
#include <cstring>

#include "kernels/kv_dtype.h"

namespace lmx::kernels::cpu {

inline void store_kv_row(const float* src, float* dst, size_t n, KvDtype storage, float scale) {
  if (storage == KvDtype::fp8_e4m3) {
    for (size_t i = 0; i < n; ++i) dst[i] = round_to_e4m3(src[i], scale);
  } else {
    std::memcpy(dst, src, n * sizeof(float));
  }
}

}  // namespace lmx::kernels::cpu
