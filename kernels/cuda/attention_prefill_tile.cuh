// What the two prefill attention kernels (attention_prefill.cu: mma.sync;
// attention_prefill_wgmma.cu: Hopper's wgmma) do alike with a tile of scores or outputs in
// registers. Both products leave each warp 16 query rows of the tile, and each thread, per 8-column
// n-tile nt, the four values x[nt][e] at row g + 8 (e / 2), column 8 nt + 2 t + e % 2 (g = lane /
// 4, t = lane % 4): the accumulators of mma.sync m16n8, and those of wgmma m64nN for the warp's 16
// of the 64 rows. Scores are kept in the log2 domain (exp2 of scale * log2(e) * q.k).
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cuda/head_dim_dispatch.cuh"
#include "kernels/cuda/mma.cuh"

namespace lmx::kernels::cuda::prefill {

constexpr float kLog2e = 1.4426950408889634f;

// A block's query rows: q0 .. q0 + rows - 1 of chunk blockIdx.z (tile blockIdx.x counted from
// the chunk's end: the heaviest tiles of a causal chunk first) for head blockIdx.y, its KV head
// and its sequence's block-table row. rows == 0: the chunk is too short to reach this tile.
struct QueryTile {
  int q0 = 0, rows = 0, kvh = 0;
  const int32_t* table = nullptr;
};
template <int kRows>
__device__ __forceinline__ QueryTile query_tile(const int32_t* __restrict__ cu_q,
                                                const int32_t* __restrict__ token_seq,
                                                const int32_t* __restrict__ block_tables, int heads,
                                                const PagedKvLayout& L) {
  QueryTile t;
  const int qb = cu_q[blockIdx.z], qe = cu_q[blockIdx.z + 1];
  t.q0 = qb + (gridDim.x - 1 - blockIdx.x) * kRows;
  if (t.q0 >= qe) return t;
  t.rows = min(kRows, qe - t.q0);
  t.kvh = blockIdx.y / (heads / L.kv_heads);
  t.table = block_tables + size_t(token_seq[t.q0]) * L.max_blocks_per_seq;
  return t;
}

// The keys a CTA's query rows read, [kmin, kmax] = [min lo, max pos], and those none of them
// masks, [full_lo, full_hi] = [max lo, min pos]; lo = pos - window + 1 (0 without a window).
struct KeyRange {
  int kmin, kmax, full_lo, full_hi;
};

// Over the CTA's rows r < rows (r = threadIdx.x: rows <= blockDim.x = 32 * kWarps), positions
// token_pos[q0 + r]; `red` is [kWarps][4] shared ints. Contains a __syncthreads.
template <int kWarps>
__device__ __forceinline__ KeyRange key_range(const int32_t* __restrict__ token_pos, int q0,
                                              int rows, int window, int (*red)[4]) {
  const int r = threadIdx.x, lane = r % 32, warp = r / 32;
  const bool valid = r < rows;
  const int p = valid ? token_pos[q0 + r] : 0;
  const int lo = window > 0 ? max(0, p - window + 1) : 0;
  const int min_lo = __reduce_min_sync(0xffffffffu, valid ? lo : INT_MAX);
  const int max_pos = __reduce_max_sync(0xffffffffu, valid ? p : -1);
  const int max_lo = __reduce_max_sync(0xffffffffu, valid ? lo : -1);
  const int min_pos = __reduce_min_sync(0xffffffffu, valid ? p : INT_MAX);
  if (lane == 0) {
    red[warp][0] = min_lo;
    red[warp][1] = max_pos;
    red[warp][2] = max_lo;
    red[warp][3] = min_pos;
  }
  __syncthreads();
  KeyRange k{INT_MAX, -1, -1, INT_MAX};
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    k.kmin = min(k.kmin, red[w][0]);
    k.kmax = max(k.kmax, red[w][1]);
    k.full_lo = max(k.full_lo, red[w][2]);
    k.full_hi = min(k.full_hi, red[w][3]);
  }
  return k;
}

// A thread's two rows of a warp's 16 (g and g + 8, index hf): position (-1 past the chunk's rows:
// every key masked), window start, running max and running sum (of this thread's columns only:
// store_rows adds the row's four threads).
struct Rows {
  int pos[2], lo[2];
  float m[2], l[2];
  // r0: the CTA row of the warp's first row.
  __device__ __forceinline__ void init(const int32_t* __restrict__ token_pos, int q0, int rows,
                                       int r0, int window) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = r0 + int(threadIdx.x % 32) / 4 + hf * 8;
      pos[hf] = r < rows ? token_pos[q0 + r] : -1;
      lo[hf] = window > 0 ? max(0, pos[hf] - window + 1) : 0;
      m[hf] = -INFINITY;
      l[hf] = 0.0f;
    }
  }
};

// 2^x in one MUFU instruction (exp2f adds the handling of subnormal results: a P below 2^-126
// becomes 0 here, far below the 16-bit P it is rounded to).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// One step of the online softmax over a tile of scores s (keys p0 ..): scaled into the log2
// domain, ALiBi-biased (slope already times log2(e)), masked outside [lo, pos] when need_mask;
// then s = P = exp2(x - running max), the running max and sum moved on, and alpha = the factor
// that scales each row's O accumulated so far. Without ALiBi the max is taken over the raw
// scores (scale > 0) and the scale folded into exp2's argument: one FFMA and one MUFU a score
// (H200, 4096-token prompt: wgmma 258 -> 270 TFLOP/s at head_dim 128, 193 -> 209 at 64).
template <int NT, bool ALIBI>
__device__ __forceinline__ void softmax_tile(float (&s)[NT][4], Rows& r, int p0, bool need_mask,
                                             float scale_log2, float slope, float (&alpha)[2]) {
  const int lane = threadIdx.x % 32;
  constexpr bool kFold = !ALIBI;
  float mx[2] = {-INFINITY, -INFINITY};
  // ALiBi: the bias of this thread's first key of the tile in each of its rows; key
  // p0 + nt * 8 + (lane % 4) * 2 + e % 2 adds slope * (nt * 8 + e % 2).
  float bias0[ALIBI ? 2 : 1];
  if constexpr (ALIBI)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) bias0[hf] = alibi_bias(slope, p0 + (lane % 4) * 2, r.pos[hf]);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int hf = e / 2;
      float x = kFold ? s[nt][e] : s[nt][e] * scale_log2;
      if constexpr (ALIBI) x += fmaf(slope, float(nt * 8 + e % 2), bias0[hf]);
      if (need_mask) {
        const int p = p0 + nt * 8 + (lane % 4) * 2 + (e % 2);
        if (p < r.lo[hf] || p > r.pos[hf]) x = -INFINITY;
      }
      s[nt][e] = x;
      mx[hf] = fmaxf(mx[hf], x);
    }
  }
  float mu[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 1));
    mx[hf] = fmaxf(mx[hf], __shfl_xor_sync(0xffffffffu, mx[hf], 2));
    if constexpr (kFold) mx[hf] *= scale_log2;
    const float mn = fmaxf(r.m[hf], mx[hf]);
    mu[hf] = mn == -INFINITY ? 0.0f : mn;  // fully masked row: no NaN
    alpha[hf] = exp2f(r.m[hf] - mu[hf]);
    r.m[hf] = mn;
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (kFold)
        s[nt][e] = exp2_ftz(fmaf(s[nt][e], scale_log2, -mu[e / 2]));
      else
        s[nt][e] = exp2f(s[nt][e] - mu[e / 2]);
      rs[e / 2] += s[nt][e];
    }
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) r.l[hf] = r.l[hf] * alpha[hf] + rs[hf];
}

// P as the A fragments of k16 steps: the values of two n8 tiles are those of one k16 A fragment
// (mma.m16n8k16's, and wgmma's A from registers, per warp).
template <typename T, int NT>
__device__ __forceinline__ void p_fragments(const float (&s)[NT][4], uint32_t (&pa)[NT / 2][4]) {
#pragma unroll
  for (int kk = 0; kk < NT / 2; ++kk) {
    pa[kk][0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
    pa[kk][1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
    pa[kk][2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[kk][3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// The warp's finished rows r0 .. r0 + 15 of O (those < rows), each times v_scale / its softmax
// sum, to out rows q0 + r (ld elements apart), columns col0 + 8 dn + 2 t.
template <typename T, int ND>
__device__ __forceinline__ void store_rows(const float (&o)[ND][4], const Rows& r, float v_scale,
                                           T* __restrict__ out, size_t ld, int q0, int r0, int rows,
                                           int col0) {
  const int lane = threadIdx.x % 32;
  float inv[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float sum = r.l[hf];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inv[hf] = sum > 0.0f ? v_scale / sum : 0.0f;
  }
  const int ra = r0 + lane / 4, rb = ra + 8;
#pragma unroll
  for (int dn = 0; dn < ND; ++dn) {
    const int d = col0 + dn * 8 + (lane % 4) * 2;
    if (ra < rows)
      *reinterpret_cast<uint32_t*>(out + size_t(q0 + ra) * ld + d) =
          pack2<T>(o[dn][0] * inv[0], o[dn][1] * inv[0]);
    if (rb < rows)
      *reinterpret_cast<uint32_t*>(out + size_t(q0 + rb) * ld + d) =
          pack2<T>(o[dn][2] * inv[1], o[dn][3] * inv[1]);
  }
}

}  // namespace lmx::kernels::cuda::prefill
