// Where a token's K/V row lives in the paged cache (layout: kernels/attention.h), for the
// kernels that write it: the rope + KV-write kernel and the decode qkv projection's epilogue.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"

namespace lmx::kernels::cuda::detail {

// Element offset of the [kv_heads, head_dim] row of position `pos` of block-table row `seq` in
// one layer's k (or v) cache: slot (block_tables[seq][pos / block_size], pos % block_size).
__device__ __forceinline__ size_t kv_slot(const int32_t* block_tables, const PagedKvLayout& L,
                                          int seq, int pos) {
  const int32_t block = block_tables[size_t(seq) * L.max_blocks_per_seq + pos / L.block_size];
  return (size_t(block) * L.block_size + pos % L.block_size) * size_t(L.kv_heads) * L.head_dim;
}

}  // namespace lmx::kernels::cuda::detail
