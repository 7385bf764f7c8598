// What the split-K decode attention kernels share (attention_decode.cu, attention_decode_mma.cu):
// the tile geometry, the paged cache's row of a position, the merge of partial softmax states,
// and the output's pairs. Device code, header-only.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>

#include "kernels/attention.h"
#include "kernels/cuda/kv_types.cuh"

namespace lmx::kernels::cuda::decode {

// Shared-memory geometry of a K or V tile row of D elements of the cache type C.
template <typename C, int D>
struct Tile {
  static constexpr int kVec = 16 / sizeof(C);  // elements per 16-byte chunk
  static constexpr int kChunks = D / kVec;     // chunks per row
  static constexpr int kRow = D + kVec;  // padded row: conflict-free 16-byte reads down a column
};

// Writes (v.x, v.y) * scale as one pair of T.
template <typename T>
__device__ __forceinline__ void store_pair(T* p, float2 v, float scale) {
  *reinterpret_cast<typename Vec2<T>::type*>(p) =
      Vec2<T>::from_float2(make_float2(v.x * scale, v.y * scale));
}

// Weight 2^(m - M) of a partial with running max m in a merge whose max is M; 0 for an empty
// partial (m = -inf), also when every partial is empty (no -inf - -inf = NaN).
__device__ __forceinline__ float merge_weight(float m, float M) {
  return m == -INFINITY ? 0.0f : exp2f(m - M);
}

// Row of the cache ([num_blocks, block_size, kv_heads] rows of head_dim) holding position p of
// kv head kvh, given the sequence's block-table entry for p.
__device__ __forceinline__ size_t kv_row(int entry, int p, const PagedKvLayout& L, int kvh) {
  return (size_t(entry) * L.block_size + p % L.block_size) * L.kv_heads + kvh;
}

// Merges n partial softmax states (m, l) with one accumulator pair each:
// returns sum_i 2^(m_i - M) acc_i and sets ml = (M, sum_i 2^(m_i - M) l_i).
template <typename Ml, typename Acc>
__device__ __forceinline__ float2 merge_partials(int n, Ml ml_of, Acc acc_of, float2& ml) {
  float M = -INFINITY;
  for (int i = 0; i < n; ++i) M = fmaxf(M, ml_of(i).x);
  float l = 0.0f;
  float2 o = make_float2(0.0f, 0.0f);
  for (int i = 0; i < n; ++i) {
    const float2 mli = ml_of(i);
    const float w = merge_weight(mli.x, M);
    const float2 a = acc_of(i);
    l = fmaf(w, mli.y, l);
    o.x = fmaf(w, a.x, o.x);
    o.y = fmaf(w, a.y, o.y);
  }
  ml = make_float2(M, l);
  return o;
}

}  // namespace lmx::kernels::cuda::decode
