// Where a token's K/V row lives in the paged cache (layout: kernels/attention.h) and how a value
// is stored there, for the kernels that write it: the rope + KV-write kernel and the decode qkv
// projection's epilogue.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"

namespace lmx::kernels::cuda::detail {

// Element offset of the [kv_heads, head_dim] row of position `pos` of block-table row `seq` in
// one layer's k (or v) cache: slot (block_tables[seq][pos / block_size], pos % block_size).
__device__ __forceinline__ size_t kv_slot(const int32_t* block_tables, const PagedKvLayout& L,
                                          int seq, int pos) {
  const int32_t block = block_tables[size_t(seq) * L.max_blocks_per_seq + pos / L.block_size];
  return (size_t(block) * L.block_size + pos % L.block_size) * size_t(L.kv_heads) * L.head_dim;
}

// x as one layer's cache stores it (kernels/kv_dtype.h): x / scale (layout.scale.k or .v; fp32
// IEEE division like the CPU reference, exact for the model dtype's scale 1), rounded once to C
// (KvFp8: to nearest even, saturating to +-448).
template <typename C>
__device__ __forceinline__ C to_cache(float x, float scale) {
  return from_f<C>(x / scale);
}

}  // namespace lmx::kernels::cuda::detail
