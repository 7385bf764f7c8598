#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/kv_store.h"

namespace lmx::kernels::cpu {
namespace {

// Offset of (position, kv head) of one sequence in a layer's cache.
inline size_t slot_offset(const int32_t* table, int pos, int kv_head, const PagedKvLayout& L) {
  const size_t block = size_t(table[pos / L.block_size]);
  const size_t slot = size_t(pos % L.block_size);
  return ((block * L.block_size + slot) * L.kv_heads + kv_head) * L.head_dim;
}

}  // namespace

void write_kv(const float* k, const float* v, int row_stride, float* k_cache, float* v_cache,
              const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
              int tokens, const PagedKvLayout& L, KvDtype storage) {
  const size_t n = size_t(L.kv_heads) * L.head_dim;
  for (int t = 0; t < tokens; ++t) {
    const int32_t* table = block_tables + size_t(token_seq[t]) * L.max_blocks_per_seq;
    const size_t dst = slot_offset(table, token_pos[t], 0, L);
    store_kv_row(k + size_t(t) * row_stride, k_cache + dst, n, storage, L.scale.k);
    store_kv_row(v + size_t(t) * row_stride, v_cache + dst, n, storage, L.scale.v);
  }
}

void paged_attention(const float* q, int q_stride, const float* k_cache, const float* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq,
                     const int32_t* token_pos, float* out, int tokens, int heads, float scale,
                     const float* alibi_slopes, int window, const PagedKvLayout& L) {
  const int group = heads / L.kv_heads;
  const int D = L.head_dim;
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < heads; ++h) {
      const int32_t* table = block_tables + size_t(token_seq[t]) * L.max_blocks_per_seq;
      const int pos = token_pos[t];
      const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
      const int kvh = h / group;
      const float* qh = q + size_t(t) * q_stride + size_t(h) * D;
      const float slope = alibi_slopes != nullptr ? alibi_slopes[h] : 0.0f;
      std::vector<float> scores(size_t(pos - lo + 1));
      float max_score = -INFINITY;
      for (int p = lo; p <= pos; ++p) {
        const float* kp = k_cache + slot_offset(table, p, kvh, L);
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot += qh[d] * kp[d];
        scores[p - lo] = dot * scale + slope * float(p - pos);  // ALiBi bias <= 0 (0 without)
        max_score = std::max(max_score, scores[p - lo]);
      }
      float denom = 0.0f;
      for (float& s : scores) {
        s = std::exp(s - max_score);
        denom += s;
      }
      float* o = out + (size_t(t) * heads + h) * D;
      std::fill(o, o + D, 0.0f);
      for (int p = lo; p <= pos; ++p) {
        const float w = scores[p - lo] / denom;
        const float* vp = v_cache + slot_offset(table, p, kvh, L);
        for (int d = 0; d < D; ++d) o[d] += w * vp[d];
      }
    }
  }
}

}  // namespace lmx::kernels::cpu
