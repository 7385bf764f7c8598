// Attention over a paged KV cache, for a ragged batch of tokens from several sequences.
//
// KV cache of one layer: k_cache, v_cache: [num_blocks, block_size, kv_heads, head_dim].
// A sequence's token at position p lives in block block_table[p / block_size], slot
// p % block_size. block_tables: [num_seqs, max_blocks_per_seq] (row-major).
// Per token t of the batch: token_seq[t] (row of block_tables), token_pos[t] (its position).
//
// write_kv: stores k, v of each batch token into its slot.
//   k, v: [tokens, row_stride] with kv_heads * head_dim values starting at column 0.
// paged_attention: causal attention of each token over positions [lo, token_pos] of its own
//   sequence, lo = max(0, token_pos - window + 1) when window > 0 (sliding window), else 0.
//   q: [tokens, q_stride] with heads * head_dim values at column 0; GQA maps query head h to
//   kv head h / (heads / kv_heads). out: [tokens, heads * head_dim].
// CPU: fp32, host memory.
#pragma once

#include <cstdint>

namespace lmx::kernels {

struct PagedKvLayout {
  int block_size;
  int kv_heads;
  int head_dim;
  int max_blocks_per_seq;  // row length of block_tables
};

}  // namespace lmx::kernels

namespace lmx::kernels::cpu {

void write_kv(const float* k, const float* v, int row_stride, float* k_cache, float* v_cache,
              const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
              int tokens, const PagedKvLayout& layout);

void paged_attention(const float* q, int q_stride, const float* k_cache, const float* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq,
                     const int32_t* token_pos, float* out, int tokens, int heads, float scale,
                     int window, const PagedKvLayout& layout);

}  // namespace lmx::kernels::cpu
