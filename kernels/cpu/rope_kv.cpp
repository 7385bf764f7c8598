#include "kernels/rope_kv.h"

#include <cstddef>

#include "kernels/cpu/kv_store.h"
#include "kernels/rotary.h"

namespace lmx::kernels::cpu {

void rope_write_kv(float* qkv, int qkv_stride, const float* qkv_bias, const int32_t* token_pos,
                   const float* inv_freq, int rotary_dim, int heads, float* k_cache, float* v_cache,
                   const int32_t* block_tables, const int32_t* token_seq, int tokens,
                   const PagedKvLayout& L, KvDtype storage) {
  const int D = L.head_dim;
  const int q_size = heads * D, kv_size = L.kv_heads * D, width = q_size + 2 * kv_size;
  if (qkv_bias)
    for (int t = 0; t < tokens; ++t)
      for (int c = 0; c < width; ++c) qkv[size_t(t) * qkv_stride + c] += qkv_bias[c];
  if (inv_freq && rotary_dim > 0) {
    rotary(qkv, qkv_stride, token_pos, inv_freq, tokens, heads, D, rotary_dim);
    rotary(qkv + q_size, qkv_stride, token_pos, inv_freq, tokens, L.kv_heads, D, rotary_dim);
  }
  for (int t = 0; t < tokens; ++t) {
    if (token_seq[t] < 0) continue;
    const int pos = token_pos[t];
    const int32_t block =
        block_tables[size_t(token_seq[t]) * L.max_blocks_per_seq + pos / L.block_size];
    const size_t dst = (size_t(block) * L.block_size + pos % L.block_size) * kv_size;
    const float* row = qkv + size_t(t) * qkv_stride;
    store_kv_row(row + q_size, k_cache + dst, size_t(kv_size), storage, L.scale.k);
    store_kv_row(row + q_size + kv_size, v_cache + dst, size_t(kv_size), storage, L.scale.v);
  }
}

}  // namespace lmx::kernels::cpu
