// Split-K ("flash-decoding") paged attention: see kernels/attention.h and docs/attention.md.
//
// Three kernels, chosen at launch by the group size (query heads per kv head):
//
// decode_mma_kernel (attention_decode_mma.cu; groups of 3-16 at head_dim <= 128 without ALiBi):
// the group's heads as the rows of tensor-core products, each warp streaming its own chunks; the
// same split plan, workspace and decode_reduce_kernel as decode_kernel.
//
// decode_kernel (the other groups > kWarpMaxGroup, i.e. GQA/MQA): grid (splits, kv_heads * head_chunks,
// tokens), 128 threads. One CTA streams the keys [begin, end) of one token's attended range for
// one kv head, in tiles of 32 positions gathered from the paged cache with cp.async (16-byte,
// zero-filled past the end, double-buffered), and serves every query head of the group (up to
// 2048 / head_dim of them) from that one copy:
//   QK: warp w scores heads w, w+4, ... ; lane = key of the tile (fp32 dot from shared memory).
//   online softmax per head in log2 domain (q pre-scaled by scale * log2(e)).
//   PV: each thread owns (head, pair of dims) items, fp32 accumulators in registers.
// One split: normalize and write out directly. Several: write fp32 partials (acc, m, l) to the
// workspace and let decode_reduce_kernel merge them.
//
// decode_warp_kernel (groups <= kWarpMaxGroup, MHA first): with 1-2 heads per kv head the
// kernel above leaves 3 of 4 warps idle in QK and is latency-bound. Here every warp streams its
// own 32-key chunks (chunks w, w+4, ... of the CTA's range) through its own K and V buffers
// (cp.async, K of the next chunk loads during PV, V during the next QK), scores them with
// lane = key for all G heads, keeps its own online-softmax state (m, l per head; acc: lane owns
// dim pairs lane, lane+32, ...), and synchronizes only with __syncwarp. At the end the 4 warps
// merge through shared memory; the splits of one (token, kv head) are one thread-block cluster
// (<= 8 CTAs) and merge through distributed shared memory, so there is no workspace and no
// second kernel.
//
// Both read the cache in its own element type C (T, or fp8 E4M3: a 16-byte piece holds 16 dims
// of a key instead of 8, widened to fp32 where the dot products and P V read them).
// ALiBi (template bool ALIBI): the score of key p gets slope[h] * log2(e) * (p - pos) in the log2
// domain, before the max / exp2 of the online softmax; the split merges need nothing more.
// Head_dim 256: the same kernels and tiles; decode_kernel's K/V tiles move to dynamic shared memory
// (77 KB a CTA with a 16-bit cache, 2 CTAs an SM), decode_warp_kernel takes 140 KB (1 CTA an SM;
// fp8: 75 KB, 3) and serves groups of at most 4 (its q rows: one 16-byte piece per thread).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/gpu_properties.h"
#include "kernels/cuda/attention_decode_common.cuh"
#include "kernels/cuda/attention_decode_mma.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/head_dim_dispatch.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/pdl.cuh"

namespace lmx::kernels::cuda {
namespace {

namespace cg = cooperative_groups;
using decode::kv_row;
using decode::merge_partials;
using decode::merge_weight;
using decode::store_pair;
using decode::Tile;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTileKeys = 32;                           // == warp size: lane = key in QK
constexpr int kMaxItems = 8;                            // (head, dim pair) accumulators per thread
constexpr int kMaxHeadDims = 2 * kThreads * kMaxItems;  // heads_per_cta * head_dim <= 2048
constexpr int kMaxSplits = 64;
#ifndef LMX_ATTN_DECODE_TARGET_CTAS            // tuning knob (bench builds variants with -D)
#define LMX_ATTN_DECODE_TARGET_CTAS (4 * 132)  // ~4 resident CTAs per SM on an H100 (132 SMs)
#endif
constexpr int kTargetCtas = LMX_ATTN_DECODE_TARGET_CTAS;
// decode_kernel's splits (plan()): up to ~kTargetCtas CTAs of at least kMinSplitKeys keys; where
// that leaves the GPU short of kFillCtas CTAs (few (token, kv head) pairs: batch 1 on a
// tensor-parallel rank's 1-2 kv heads, or GQA with 8 at small batches), more splits, down to one
// 32-key tile each, up to kFillCtas. Measured (bench/RESULTS.md, 4 H100s, graphs, 512-key
// contexts planned for 1024): Llama-2-70B at degree 4, batch 1, 8 splits of 128 keys a KV head
// (5 of them with keys) 14.08 ms a step, 32 splits of one tile 13.41 ms; Llama-3-8B batch 1
// 5.81 -> 5.48 ms. Batch 32 keeps the 128-key plan (9 splits instead of 8, the same keys, measured
// 2.1% slower at degree 4, unexplained).
constexpr int kMinSplitKeys = 128;
#ifndef LMX_ATTN_DECODE_FILL_CTAS
#define LMX_ATTN_DECODE_FILL_CTAS (2 * 132)  // ~2 CTAs per SM on an H100; 0: 128-key splits only
#endif
constexpr int kFillCtas = LMX_ATTN_DECODE_FILL_CTAS;
// decode_warp_kernel knobs: the largest group it serves (0 = off, 1 = MHA only, up to 8); the
// CTAs its split plan aims at (2 per SM: each CTA keeps 4 warps x 8-16 KB in flight, so 2 per
// SM already saturate HBM and a partial last wave costs little); the most splits (= cluster
// size; 8 is the portable maximum, 16 needs the non-portable attribute, set at launch).
#ifndef LMX_ATTN_DECODE_WARP_MAX_GROUP
#define LMX_ATTN_DECODE_WARP_MAX_GROUP 2
#endif
#ifndef LMX_ATTN_DECODE_WARP_TARGET_CTAS
#define LMX_ATTN_DECODE_WARP_TARGET_CTAS (2 * 132)
#endif
#ifndef LMX_ATTN_DECODE_MAX_CLUSTER
#define LMX_ATTN_DECODE_MAX_CLUSTER 8
#endif
// decode_mma_kernel for the groups it serves (decode::mma_serves); 0: decode_kernel for every group
// past kWarpMaxGroup (comparisons).
#ifndef LMX_ATTN_DECODE_MMA
#define LMX_ATTN_DECODE_MMA 1
#endif
constexpr bool kDecodeMma = LMX_ATTN_DECODE_MMA != 0;
constexpr int kWarpMaxGroup = LMX_ATTN_DECODE_WARP_MAX_GROUP;
constexpr int kWarpTargetCtas = LMX_ATTN_DECODE_WARP_TARGET_CTAS;
constexpr int kMaxCluster = LMX_ATTN_DECODE_MAX_CLUSTER;
static_assert(kWarpMaxGroup >= 0 && kWarpMaxGroup <= 8, "decode_warp_kernel serves groups <= 8");
static_assert(kMaxCluster >= 1 && kMaxCluster <= 16, "cluster size is at most 16");
// decode_warp_kernel serves a group of G query heads at head_dim D when G <= kWarpMaxGroup and one
// 16-byte piece per thread holds the CTA's q rows (G * D <= 1024: at head_dim 256, G <= 4).
constexpr bool warp_kernel_serves(int group, int head_dim) {
  return group <= kWarpMaxGroup && group * head_dim <= kThreads * 8;
}
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// s[g] = q[g] . k for G heads (q: fp32 [G][D] in shared memory, pre-scaled; k: one row of the
// cache type C in shared memory, 16-byte aligned). Partial sums per head shorten the dependent
// FMA chain (it is on the critical path of a chunk when few warps are busy, e.g. batch 1).
template <typename C, int D, int G>
__device__ __forceinline__ void dot_rows(const C* k, const float* q, float (&s)[G]) {
  using C2 = typename Vec2<C>::type;
  constexpr int kVec = Tile<C, D>::kVec;
  constexpr int kParts = G == 1 ? 4 : 2;
  float a[G][kParts];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < kParts; ++i) a[g][i] = 0.0f;
  const float4* k4 = reinterpret_cast<const float4*>(k);
#pragma unroll
  for (int c = 0; c < Tile<C, D>::kChunks; ++c) {
    const float4 raw = k4[c];
    const C2* k2 = reinterpret_cast<const C2*>(&raw);
#pragma unroll
    for (int e = 0; e < kVec / 4; ++e) {
      const float2 ka = Vec2<C>::to_float2(k2[2 * e]);
      const float2 kb = Vec2<C>::to_float2(k2[2 * e + 1]);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float4 qv = *reinterpret_cast<const float4*>(&q[g * D + c * kVec + 4 * e]);
        float& x = a[g][(c * (kVec / 4) + e) % kParts];
        x = fmaf(qv.x, ka.x, x);
        x = fmaf(qv.y, ka.y, x);
        x = fmaf(qv.z, kb.x, x);
        x = fmaf(qv.w, kb.y, x);
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    s[g] = a[g][0];
#pragma unroll
    for (int i = 1; i < kParts; ++i) s[g] += a[g][i];
  }
}

// acc[g] += sum over the tile's keys k of p[g * p_stride + k] * (V[k][2i], V[k][2i + 1]) for one
// dim pair i: v = &V[0][2i] in shared memory (rows kRow apart), p fp32 in shared memory.
// Keys past the end have p = 0 and zero-filled V (never NaN).
template <typename C, int kRow, int G>
__device__ __forceinline__ void pv_pair(const C* v, const float* p, int p_stride,
                                        float2 (&acc)[G]) {
  using C2 = typename Vec2<C>::type;
#pragma unroll
  for (int k4 = 0; k4 < kTileKeys / 4; ++k4) {
    float4 pv[G];
#pragma unroll
    for (int g = 0; g < G; ++g) pv[g] = reinterpret_cast<const float4*>(p + g * p_stride)[k4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 x = Vec2<C>::to_float2(*reinterpret_cast<const C2*>(&v[(k4 * 4 + e) * kRow]));
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float pk = e == 0 ? pv[g].x : e == 1 ? pv[g].y : e == 2 ? pv[g].z : pv[g].w;
        acc[g].x = fmaf(pk, x.x, acc[g].x);
        acc[g].y = fmaf(pk, x.y, acc[g].y);
      }
    }
  }
}

struct Split {
  int splits, keys, head_chunks, heads_per_cta;
  bool warp;  // decode_warp_kernel (splits merged in a cluster, no workspace)
};

// decode_warp_kernel's dynamic shared memory for a cache element of `cache_bytes` bytes: one K
// and one V tile of kTileKeys padded rows per warp (Tile::kRow = D + 16 / cache_bytes).
constexpr int warp_smem_bytes(int head_dim, int cache_bytes) {
  return kWarps * 2 * kTileKeys * (head_dim + 16 / cache_bytes) * cache_bytes;
}

// Grid shape for one launch: a function of host ints that stay fixed for a captured graph.
// cache_bytes: the size of a cache element (2, or 1 for fp8).
Split plan(int tokens, int heads, int kv_heads, int head_dim, int max_context, int window,
           int cache_bytes = 2) {
  Split s{};
  const int group = heads / kv_heads;
  int ctx = std::max(1, max_context);
  if (window > 0) ctx = std::min(ctx, window);
  int splits = 1;
  if (warp_kernel_serves(group, head_dim)) {
    // Enough CTAs to fill the GPU, at most one cluster of splits, and each CTA's planned range at
    // least one 32-key chunk per warp. The kernel divides each token's actual range evenly among
    // the splits, so a graph planned for a longer context (more splits) spreads a shorter one
    // over all of them. Where one CTA fills an SM's shared memory (head_dim 256 over a 16-bit
    // cache: 135 KB), clusters of at most 4: clusters of 8 such CTAs took 1.5x the time at batch
    // 1 (GPT-J, 512 keys: 20.7 against 14.2 us; H100, bench/RESULTS.md), as if they did not all
    // fit one wave.
    s.warp = true;
    s.head_chunks = 1;
    s.heads_per_cta = group;
    const GpuProperties& gpu = current_gpu();
    const long base = long(std::max(tokens, 1)) * kv_heads;
    const int chunks = (ctx + kTileKeys - 1) / kTileKeys;
    const bool one_cta_an_sm = 2 * warp_smem_bytes(head_dim, cache_bytes) > gpu.smem_per_sm;
    const int max_cluster = one_cta_an_sm ? std::min(kMaxCluster, 4) : kMaxCluster;
    splits = int(std::min<long>(max_cluster, (kWarpTargetCtas + base - 1) / base));
    splits = std::min(splits, (chunks + kWarps - 1) / kWarps);
    while (splits & (splits - 1)) splits &= splits - 1;  // cluster sizes 1, 2, 4, 8 (16)
    // Thread-block clusters need sm_90; before it the warp kernel runs one split a (token, KV
    // head): correct, fewer CTAs for short batches.
    if (gpu.major < 9) splits = 1;
  } else {
    const int max_per_cta = std::max(1, kMaxHeadDims / head_dim);
    s.head_chunks = (group + max_per_cta - 1) / max_per_cta;
    s.heads_per_cta = (group + s.head_chunks - 1) / s.head_chunks;
    const long base = long(std::max(tokens, 1)) * kv_heads * s.head_chunks;
    splits = int(std::min<long>(kMaxSplits, (kTargetCtas + base - 1) / base));
    splits = std::min(splits, (ctx + kMinSplitKeys - 1) / kMinSplitKeys);
    const int fill = int(std::min<long>(kMaxSplits, kFillCtas / base));
    splits = std::max(splits, std::min(fill, (ctx + kTileKeys - 1) / kTileKeys));
  }
  s.splits = std::max(1, splits);
  const int per = (ctx + s.splits - 1) / s.splits;
  s.keys = (per + kTileKeys - 1) / kTileKeys * kTileKeys;
  return s;
}

size_t partial_bytes(int tokens, int heads, int head_dim, int splits) {
  return size_t(tokens) * heads * splits * (size_t(head_dim) + 2) * sizeof(float);
}

// decode_kernel's K (kWhich = 0) or V (1) tiles: static shared memory, except at head_dim 256,
// where the two (68 KB with a 16-bit cache) pass the 48 KB static limit and live in dynamic shared
// memory (decode_kernel_smem).
template <typename Tiles, bool kDynamic, int kWhich>
__device__ __forceinline__ Tiles& decode_tiles() {
  if constexpr (kDynamic) {
    extern __shared__ __align__(16) unsigned char smem[];
    return reinterpret_cast<Tiles*>(smem)[kWhich];
  } else {
    __shared__ __align__(16) Tiles tiles;
    return tiles;
  }
}

// q and the caches are not __restrict__ (no read-only loads): the rope + KV-write kernel before
// this one writes them, and a programmatic dependent launch overlaps it (kernels/cuda/pdl.cuh).
template <typename T, typename C, int D, bool ALIBI>
__global__ void __launch_bounds__(kThreads)
    decode_kernel(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                  const int32_t* __restrict__ block_tables, const int32_t* __restrict__ token_seq,
                  const int32_t* __restrict__ token_pos, T* __restrict__ out,
                  float* __restrict__ ws_acc, float2* __restrict__ ws_ml, int heads,
                  float scale_log2, const float* __restrict__ alibi_slopes, int window,
                  PagedKvLayout L, int splits, int split_keys, int head_chunks, int heads_per_cta) {
  pdl::wait_for_primary();
  pdl::allow_dependents();  // the output projection may start streaming its weights
  using Geo = Tile<C, D>;
  constexpr int kVec = Geo::kVec, kChunks = Geo::kChunks, kRow = Geo::kRow;
  constexpr int kPairs = D / 2;
  constexpr int kMaxHeads = kMaxHeadDims / D;

  using Tiles = C[2][kTileKeys][kRow];  // [stage][key][padded dim]
  Tiles& ks = decode_tiles<Tiles, (D > 128), 0>();
  Tiles& vs = decode_tiles<Tiles, (D > 128), 1>();
  __shared__ __align__(16) float qs[kMaxHeads][D];
  __shared__ __align__(16) float ps[kMaxHeads][kTileKeys];
  __shared__ float m_s[kMaxHeads], l_s[kMaxHeads], alpha_s[kMaxHeads];
  __shared__ float slope_s[ALIBI ? kMaxHeads : 1];  // ALiBi slope * log2(e) per head

  const int split = blockIdx.x;
  const int kvh = blockIdx.y / head_chunks;
  const int g0 = (blockIdx.y % head_chunks) * heads_per_cta;
  const int t = blockIdx.z;
  const int group = heads / L.kv_heads;
  const int gc = min(heads_per_cta, group - g0);  // query heads served by this CTA
  if (gc <= 0) return;

  const int pos = token_pos[t];
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const int begin = lo + split * split_keys;
  if (begin > pos) return;  // this token's range has fewer splits
  const int end = split == splits - 1 ? pos + 1 : min(pos + 1, begin + split_keys);
  const int32_t* table = block_tables + size_t(token_seq[t]) * L.max_blocks_per_seq;
  const int h0 = kvh * group + g0;  // first query head of this CTA
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  // Gather one tile of K and V (positions [p0, p0 + 32)) into stage st.
  auto load_tile = [&](int p0, int st) {
    for (int c = tid; c < kTileKeys * kChunks; c += kThreads) {
      const int r = c / kChunks, part = c % kChunks;
      const int p = p0 + r;
      const bool valid = p < end;
      const size_t off = valid ? kv_row(table[p / L.block_size], p, L, kvh) * D + part * kVec : 0;
      cp_async16(&ks[st][r][part * kVec], k_cache + off, valid);
      cp_async16(&vs[st][r][part * kVec], v_cache + off, valid);
    }
    cp_async_commit();
  };

  const int tiles = (end - begin + kTileKeys - 1) / kTileKeys;
  load_tile(begin, 0);

  for (int i = tid; i < gc * D; i += kThreads) {
    const int g = i / D, d = i % D;
    qs[g][d] = float(q[size_t(t) * q_stride + size_t(h0 + g) * D + d]) * scale_log2;
  }
  for (int g = tid; g < gc; g += kThreads) {
    m_s[g] = -INFINITY;
    l_s[g] = 0.0f;
    if constexpr (ALIBI) slope_s[g] = alibi_slopes[h0 + g] * kLog2e;
  }
  float2 acc[kMaxItems];
#pragma unroll
  for (int j = 0; j < kMaxItems; ++j) acc[j] = make_float2(0.0f, 0.0f);

  for (int it = 0; it < tiles; ++it) {
    const int st = it & 1;
    const int p0 = begin + it * kTileKeys;
    if (it + 1 < tiles) {
      load_tile(p0 + kTileKeys, st ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    // Scores and online softmax: warp -> heads, lane -> key.
    {
      const bool valid = p0 + lane < end;
      for (int g = warp; g < gc; g += kWarps) {
        float s[1];
        dot_rows<C, D, 1>(&ks[st][lane][0], &qs[g][0], s);
        if constexpr (ALIBI) s[0] += alibi_bias(slope_s[g], p0 + lane, pos);
        s[0] = valid ? s[0] : -INFINITY;
        const float m_old = m_s[g];
        const float m_new = fmaxf(m_old, warp_max(s[0]));  // finite: key p0 is always valid
        const float p = valid ? exp2f(s[0] - m_new) : 0.0f;
        const float sum = warp_sum(p);
        ps[g][lane] = p;
        __syncwarp();
        if (lane == 0) {
          const float alpha = exp2f(m_old - m_new);  // 0 on the first tile
          m_s[g] = m_new;
          l_s[g] = l_s[g] * alpha + sum;
          alpha_s[g] = alpha;
        }
      }
    }
    __syncthreads();

    // acc = acc * alpha + P V
#pragma unroll
    for (int j = 0; j < kMaxItems; ++j) {
      const int i = tid + j * kThreads;
      if (i < gc * kPairs) {
        const int g = i / kPairs, dp = i % kPairs;
        const float alpha = alpha_s[g];
        float2 a[1] = {make_float2(acc[j].x * alpha, acc[j].y * alpha)};
        pv_pair<C, kRow, 1>(&vs[st][0][2 * dp], &ps[g][0], 0, a);
        acc[j] = a[0];
      }
    }
    __syncthreads();  // stage st is reloaded by the next iteration
  }

#pragma unroll
  for (int j = 0; j < kMaxItems; ++j) {
    const int i = tid + j * kThreads;
    if (i < gc * kPairs) {
      const int g = i / kPairs, dp = i % kPairs;
      const int h = h0 + g;
      if (splits == 1) {
        store_pair(&out[(size_t(t) * heads + h) * D + 2 * dp], acc[j], L.scale.v / l_s[g]);
      } else {
        const size_t row = (size_t(t) * heads + h) * splits + split;
        *reinterpret_cast<float2*>(&ws_acc[row * D + 2 * dp]) = acc[j];
        if (dp == 0) ws_ml[row] = make_float2(m_s[g], l_s[g]);
      }
    }
  }
}

// Dynamic shared memory of decode_kernel: its double-buffered K and V tiles at head_dim 256 (static
// below: decode_tiles).
template <typename C, int D>
constexpr int decode_kernel_smem() {
  return D > 128 ? 2 * 2 * kTileKeys * Tile<C, D>::kRow * int(sizeof(C)) : 0;
}

// Dynamic shared memory of decode_warp_kernel: one K and one V tile per warp.
template <typename C, int D>
constexpr int warp_kernel_smem() {
  static_assert(warp_smem_bytes(D, int(sizeof(C))) ==
                kWarps * 2 * kTileKeys * Tile<C, D>::kRow * int(sizeof(C)));
  return warp_smem_bytes(D, int(sizeof(C)));
}

// Resident CTAs an SM decode_warp_kernel's registers are budgeted for: 0 (no bound) as tuned,
// except head_dim 256 over an fp8 cache, whose 70 KB of tiles fit 3 CTAs an SM and which ptxas
// would otherwise hold to 96 registers with a spill.
template <typename C, int D>
constexpr int kWarpMinCtas = D > 128 && kIsFp8<C> ? 3 : 0;

// Grid (splits, kv_heads, tokens), 128 threads, clusters of (splits, 1, 1) when splits > 1.
// G = heads / kv_heads query heads per CTA.
template <typename T, typename C, int D, int G, bool ALIBI>
__global__ void __launch_bounds__(kThreads, kWarpMinCtas<C, D>)
    decode_warp_kernel(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                       const int32_t* __restrict__ block_tables,
                       const int32_t* __restrict__ token_seq, const int32_t* __restrict__ token_pos,
                       T* __restrict__ out, int heads, float scale_log2,
                       const float* __restrict__ alibi_slopes, int window, PagedKvLayout L,
                       int splits) {
  using Geo = Tile<C, D>;
  constexpr int kVec = Geo::kVec, kChunks = Geo::kChunks, kRow = Geo::kRow;
  constexpr int kElems = kTileKeys * kRow;  // one K or V tile
  constexpr int kPairs = D / 2;
  constexpr int kPairIters = (kPairs + 31) / 32;  // dim pairs of a lane: lane, lane + 32, ...
  constexpr int kQVec = 16 / sizeof(T);           // q elements per 16-byte piece
  constexpr int kQVecs = G * D / kQVec;           // 16-byte pieces of the CTA's q rows
  static_assert(kTileKeys == 32, "lane = key");
  static_assert(kQVecs <= kThreads, "q: one 16-byte piece per thread");
  static_assert(G * D * sizeof(float) <= kElems * sizeof(C), "warp partial fits a tile");
  using T2 = typename Vec2<T>::type;

  extern __shared__ __align__(16) unsigned char smem[];  // [kWarps][K, V][kTileKeys][kRow] C
  __shared__ __align__(16) float qs[G * D];              // q * scale * log2(e)
  __shared__ __align__(16) float ps[kWarps][G][kTileKeys];
  __shared__ __align__(16) float cta_acc[G * D];  // the CTA's merged partial (splits > 1)
  __shared__ float2 cta_ml[G];

  const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int h0 = kvh * G;
  C* const tiles = reinterpret_cast<C*>(smem);
  C* const kt = tiles + warp * 2 * kElems;  // this warp's K tile, then its V tile
  C* const vt = kt + kElems;

  // Launched as a programmatic dependent of the kernel that writes q and this step's K/V row
  // (position pos of each token). Everything else this kernel reads is older: the step's metadata
  // (copied before the step) and the keys before pos (written by earlier steps). So the metadata
  // lookups and the first chunk's K/V gather, minus the row of pos, are issued before waiting, and
  // overlap the previous kernel's tail. The token's seq and pos are read together, so the chain
  // to the first K/V bytes is (seq, pos) -> table entry -> K/V.
  //
  // The splits divide the token's actual range [lo, pos] evenly, in 32-key chunks (split s takes
  // chunks [s C / splits, (s + 1) C / splits) of its C): a graph captured for a longer context
  // (max_context, rounded up to a power of two) still spreads a short one over all its CTAs.
  const int seq = token_seq[t];
  const int pos = token_pos[t];
  const int32_t* table = block_tables + size_t(seq) * L.max_blocks_per_seq;
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const int range_chunks = (pos - lo + kTileKeys) / kTileKeys;  // ceil((pos - lo + 1) / 32)
  const int begin = lo + split * range_chunks / splits * kTileKeys;
  const int end = min(pos + 1, lo + (split + 1) * range_chunks / splits * kTileKeys);
  const int chunks = begin < end ? (end - begin + kTileKeys - 1) / kTileKeys : 0;
  const int mine = chunks > warp ? (chunks - 1 - warp) / kWarps + 1 : 0;  // this warp's chunks
  const int first = begin + warp * kTileKeys + lane;  // this lane's key in the warp's first chunk
  int entry = first < end ? table[first / L.block_size] : 0;

  // Chunk n of this warp covers positions [chunk_p0(n), chunk_p0(n) + 32); lane = key.
  auto chunk_p0 = [&](int n) { return begin + (warp + n * kWarps) * kTileKeys; };
  auto entry_of = [&](int n) {
    const int p = chunk_p0(n) + lane;
    return p < end ? table[p / L.block_size] : 0;
  };
  // Cache row of this lane's key (32-bit: one layer's cache has far fewer than 2^32 rows).
  auto row_of = [&](int n, int e) -> uint32_t {
    const int p = chunk_p0(n) + lane;
    return p < end ? uint32_t(kv_row(e, p, L, kvh)) : 0u;
  };
  // Gather K or V of chunk n into a tile: consecutive lanes copy consecutive 16-byte pieces of
  // a row (coalesced), each row's address shuffled from the lane that owns the key. Tile row
  // `skip` (if any) is not touched at all (not even zero-filled): it is copied after the wait.
  auto load = [&](C* dst, const C* cache, uint32_t row, int n, int skip) {
    const int valid_rows = end - chunk_p0(n);
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int c = j * 32 + lane, r = c / kChunks, part = c % kChunks;
      const uint32_t rr = __shfl_sync(0xffffffffu, row, r);
      if (r != skip)
        cp_async16(dst + r * kRow + part * kVec, cache + size_t(rr) * D + part * kVec,
                   r < valid_rows);
    }
    cp_async_commit();
  };

  // The first chunk before the wait, without the row of pos (this step's, not written yet).
  uint32_t row = 0;
  const int pos_row = mine > 0 && pos < chunk_p0(0) + kTileKeys ? pos - chunk_p0(0) : -1;
  if (mine > 0) {
    row = row_of(0, entry);
    load(kt, k_cache, row, 0, pos_row);
    load(vt, v_cache, row, 0, pos_row);
  }
  int next_entry = mine > 1 ? entry_of(1) : 0;
  // ALiBi slope * log2(e) per head: model constants (not written by the kernel waited on).
  float slope[ALIBI ? G : 1];
#pragma unroll
  for (int g = 0; g < G; ++g)
    if constexpr (ALIBI) slope[g] = alibi_slopes[h0 + g] * kLog2e;

  // No allow_dependents(): the output projection starts as this kernel's blocks exit. Letting
  // it in after the wait made its weight stream compete with this kernel's loads on the
  // step's critical path (kernels/cuda/pdl.cuh).
  pdl::wait_for_primary();
  float4 qraw = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (tid < kQVecs)
    qraw = *reinterpret_cast<const float4*>(q + size_t(t) * q_stride + size_t(h0) * D + tid * kQVec);
  if (pos_row >= 0) {  // K and V of pos, now written: plain (coherent) loads into the tiles
    const uint32_t pos_cache_row = __shfl_sync(0xffffffffu, row, pos_row);
    for (int c = lane; c < 2 * kChunks; c += 32) {
      const bool is_v = c >= kChunks;
      const int part = is_v ? c - kChunks : c;
      const C* src = (is_v ? v_cache : k_cache) + size_t(pos_cache_row) * D + part * kVec;
      *reinterpret_cast<uint4*>((is_v ? vt : kt) + pos_row * kRow + part * kVec) =
          *reinterpret_cast<const uint4*>(src);
    }
  }
  if (tid < kQVecs) {
    const T2* q2 = reinterpret_cast<const T2*>(&qraw);
#pragma unroll
    for (int e = 0; e < kQVec / 2; ++e) {
      const float2 f = Vec2<T>::to_float2(q2[e]);
      qs[tid * kQVec + 2 * e] = f.x * scale_log2;
      qs[tid * kQVec + 2 * e + 1] = f.y * scale_log2;
    }
  }
  __syncthreads();

  float m[G], l[G];
  float2 acc[kPairIters][G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int j = 0; j < kPairIters; ++j) acc[j][g] = make_float2(0.0f, 0.0f);
  }

  // Commit groups in order K0 V0 K1 V1 ... (empty ones past the warp's last chunk), so
  // wait_group<1> before each use leaves exactly the next tile in flight.
  for (int n = 0; n < mine; ++n) {
    const bool valid = chunk_p0(n) + lane < end;
    cp_async_wait<1>();  // K of chunk n
    __syncwarp();
    float s[G];
    dot_rows<C, D, G>(kt + lane * kRow, qs, s);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if constexpr (ALIBI) s[g] += alibi_bias(slope[g], chunk_p0(n) + lane, pos);
      const float x = valid ? s[g] : -INFINITY;
      const float m_new = fmaxf(m[g], warp_max(x));  // finite: key chunk_p0(n) is valid
      const float alpha = exp2f(m[g] - m_new);       // 0 on the first chunk
      const float p = valid ? exp2f(x - m_new) : 0.0f;
      m[g] = m_new;
      l[g] = fmaf(l[g], alpha, p);  // per lane; summed over the warp at the end
      ps[warp][g][lane] = p;
#pragma unroll
      for (int j = 0; j < kPairIters; ++j) {
        acc[j][g].x *= alpha;
        acc[j][g].y *= alpha;
      }
    }
    __syncwarp();  // K tile read, P visible to the warp
    if (n + 1 < mine) {
      row = row_of(n + 1, next_entry);
      load(kt, k_cache, row, n + 1, -1);
    } else {
      cp_async_commit();
    }
    cp_async_wait<1>();  // V of chunk n
    __syncwarp();
#pragma unroll
    for (int j = 0; j < kPairIters; ++j) {
      const int i = lane + 32 * j;
      if (kPairs % 32 == 0 || i < kPairs)
        pv_pair<C, kRow, G>(vt + 2 * i, &ps[warp][0][0], kTileKeys, acc[j]);
    }
    __syncwarp();  // V tile read
    if (n + 1 < mine) {
      load(vt, v_cache, row, n + 1, -1);
      if (n + 2 < mine) next_entry = entry_of(n + 2);
    } else {
      cp_async_commit();
    }
  }
  cp_async_wait<0>();
  __syncwarp();

  // Warp partials into the warp's own tiles: acc [G][D] fp32 over K, (m, l) [G] over V.
  float* const wacc = reinterpret_cast<float*>(kt);
  float2* const wml = reinterpret_cast<float2*>(vt);
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const float lsum = warp_sum(l[g]);
#pragma unroll
    for (int j = 0; j < kPairIters; ++j) {
      const int i = lane + 32 * j;
      if (kPairs % 32 == 0 || i < kPairs)
        *reinterpret_cast<float2*>(&wacc[g * D + 2 * i]) = acc[j][g];
    }
    if (lane == 0) wml[g] = make_float2(m[g], lsum);
  }
  __syncthreads();

  // Merge the warps; one split: normalize and write out.
  for (int i = tid; i < G * kPairs; i += kThreads) {
    const int g = i / kPairs, dp = i % kPairs;
    float2 ml;
    const float2 o = merge_partials(
        kWarps,
        [&](int w) { return reinterpret_cast<const float2*>(tiles + (2 * w + 1) * kElems)[g]; },
        [&](int w) {
          return reinterpret_cast<const float2*>(tiles + 2 * w * kElems)[g * kPairs + dp];
        },
        ml);
    if (splits == 1) {
      store_pair(&out[(size_t(t) * heads + h0 + g) * D + 2 * dp], o, L.scale.v / ml.y);
    } else {
      *reinterpret_cast<float2*>(&cta_acc[2 * i]) = o;
      if (dp == 0) cta_ml[g] = ml;
    }
  }
  if (splits == 1) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // no clusters before sm_90: plan() gives these GPUs one split (never reached)
#else
  // Merge the splits of the cluster through distributed shared memory: CTA rank r writes the
  // dim pairs [r * per, (r + 1) * per).
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int rank = int(cluster.block_rank());
  const int per = (G * kPairs + splits - 1) / splits;
  const int stop = min(G * kPairs, (rank + 1) * per);
  for (int i = rank * per + tid; i < stop; i += kThreads) {
    const int g = i / kPairs, dp = i % kPairs;
    float2 ml;
    const float2 o = merge_partials(
        splits, [&](int r) { return cluster.map_shared_rank(cta_ml, r)[g]; },
        [&](int r) {
          return reinterpret_cast<const float2*>(cluster.map_shared_rank(cta_acc, r))[i];
        },
        ml);
    store_pair(&out[(size_t(t) * heads + h0 + g) * D + 2 * dp], o, L.scale.v / ml.y);
  }
  cluster.sync();  // peers read this CTA's shared memory until here
#endif
}

// Merge the splits of one (token, head): out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    decode_reduce_kernel(const float* ws_acc, const float2* ws_ml,
                         const int32_t* __restrict__ token_pos, T* __restrict__ out, int heads,
                         int window, int splits, int split_keys, float v_scale) {
  pdl::wait_for_primary();
  pdl::allow_dependents();
  __shared__ float w_s[kMaxSplits];
  __shared__ float inv_l;
  const int t = blockIdx.y, h = blockIdx.x;
  const int pos = token_pos[t];
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const int n = pos - lo + 1;
  const int active = min(splits, (n + split_keys - 1) / split_keys);
  const size_t row0 = (size_t(t) * heads + h) * splits;
  if (threadIdx.x < 32) {
    float m = -INFINITY;
    for (int s = threadIdx.x; s < active; s += 32) m = fmaxf(m, ws_ml[row0 + s].x);
    m = warp_max(m);
    float l = 0.0f;
    for (int s = threadIdx.x; s < active; s += 32) {
      const float2 ml = ws_ml[row0 + s];
      const float w = merge_weight(ml.x, m);
      w_s[s] = w;
      l += w * ml.y;
    }
    l = warp_sum(l);
    if (threadIdx.x == 0) inv_l = v_scale / l;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float o = 0.0f;
    for (int s = 0; s < active; ++s) o = fmaf(w_s[s], ws_acc[(row0 + s) * D + d], o);
    out[(size_t(t) * heads + h) * D + d] = T(o * inv_l);
  }
}

template <typename T, typename C, int D, bool ALIBI>
void launch(const T* q, int q_stride, const C* k_cache, const C* v_cache,
            const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos, T* out,
            int tokens, int heads, float scale, const float* alibi_slopes, int window,
            const PagedKvLayout& L, const Split& s, void* workspace, cudaStream_t stream) {
  float* ws_acc = static_cast<float*>(workspace);
  float2* ws_ml = s.splits > 1
                      ? reinterpret_cast<float2*>(ws_acc + size_t(tokens) * heads * s.splits * D)
                      : nullptr;
  if (kDecodeMma && s.head_chunks == 1 && decode::mma_serves(heads / L.kv_heads, D, ALIBI)) {
    decode::launch_mma<T, C>(q, q_stride, k_cache, v_cache, block_tables, token_seq, token_pos,
                             out, ws_acc, ws_ml, tokens, heads, scale * kLog2e, window, L,
                             s.splits, s.keys, stream);
  } else {
    const dim3 grid(s.splits, L.kv_heads * s.head_chunks, tokens);
    auto* kernel = decode_kernel<T, C, D, ALIBI>;
    constexpr int smem = decode_kernel_smem<C, D>();
    // Head_dim 256: tiles + q + P exceed the default 48 KB (raised on every launch: cheap,
    // allowed during graph capture). The other dims stay under it.
    if constexpr (D > 128)
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    pdl::launch_dependent(kernel, dim3(grid), dim3(kThreads), smem, stream, q, q_stride, k_cache,
                          v_cache, block_tables, token_seq, token_pos, out, ws_acc, ws_ml, heads,
                          scale * kLog2e, alibi_slopes, window, L, s.splits, s.keys,
                          s.head_chunks, s.heads_per_cta);
  }
  if (s.splits > 1)
    pdl::launch_dependent(decode_reduce_kernel<T, D>, dim3(heads, tokens), dim3(kThreads), 0,
                          stream, ws_acc, ws_ml, token_pos, out, heads, window, s.splits, s.keys,
                          L.scale.v);
}

template <typename T, typename C, int D, int G, bool ALIBI>
void launch_warp(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                 const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
                 T* out, int tokens, int heads, float scale, const float* alibi_slopes, int window,
                 const PagedKvLayout& L, const Split& s, cudaStream_t stream) {
  auto* kernel = decode_warp_kernel<T, C, D, G, ALIBI>;
  constexpr int smem = warp_kernel_smem<C, D>();
  // Raised on every launch (cheap, per device, allowed during graph capture). Max carveout:
  // 3 CTAs of ~70 KB per SM at head_dim 128; L1 serves only q and the block tables.
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                       int(cudaSharedmemCarveoutMaxShared));
  if (kMaxCluster > 8 && s.splits > 1)  // only GPUs with clusters get splits > 1
    cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(s.splits, L.kv_heads, tokens);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2] = {pdl::dependent_attribute(),
                                  detail::cluster_attribute(unsigned(s.splits))};
  cfg.attrs = attrs;
  cfg.numAttrs = s.splits > 1 ? 2 : 1;  // a cluster only when the splits merge through it
  cudaLaunchKernelEx(&cfg, kernel, q, q_stride, k_cache, v_cache, block_tables, token_seq,
                     token_pos, out, heads, scale * kLog2e, alibi_slopes, window, L, s.splits);
}

// Calls fn(std::integral_constant<int, G>{}) for group == G, G in [1, kWarpMaxGroup].
template <int G = 1, typename Fn>
void dispatch_group(int group, Fn&& fn) {
  if constexpr (G <= kWarpMaxGroup) {
    if (group == G) return fn(std::integral_constant<int, G>{});
    dispatch_group<G + 1>(group, fn);
  }
}

}  // namespace

size_t paged_attention_decode_workspace_bytes(int max_tokens, int heads, int kv_heads, int head_dim,
                                              int max_context) {
  size_t bytes = 0;
  for (int t = 1; t <= max_tokens; ++t) {
    const Split s = plan(t, heads, kv_heads, head_dim, max_context, 0);
    if (!s.warp && s.splits > 1)
      bytes = std::max(bytes, partial_bytes(t, heads, head_dim, s.splits));
  }
  return bytes;
}

template <typename T, typename C>
void paged_attention_decode(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                            const int32_t* block_tables, const int32_t* token_seq,
                            const int32_t* token_pos, T* out, int tokens, int heads, float scale,
                            const float* alibi_slopes, int window, const PagedKvLayout& layout,
                            int max_context, void* workspace, size_t workspace_bytes,
                            cudaStream_t stream) {
  if (tokens <= 0 || heads <= 0) return;
  scale *= layout.scale.k;  // scores of the cached codes (kernels/attention.h)
  Split s = plan(tokens, heads, layout.kv_heads, layout.head_dim, max_context, window,
                 int(sizeof(C)));
  if (s.warp) {  // splits merged inside the kernel: no workspace
    dispatch_head_dim(layout.head_dim, "paged_attention_decode", [&](auto dim) {
      dispatch_group(s.heads_per_cta, [&](auto g) {
        constexpr int D = decltype(dim)::value, G = decltype(g)::value;
        if constexpr (warp_kernel_serves(G, D)) {  // else plan() did not choose it
          dispatch_alibi(alibi_slopes, [&](auto alibi) {
            launch_warp<T, C, D, G, decltype(alibi)::value>(
                q, q_stride, k_cache, v_cache, block_tables, token_seq, token_pos, out, tokens,
                heads, scale, alibi_slopes, window, layout, s, stream);
          });
        }
      });
    });
    return;
  }
  if (s.splits > 1) {
    // Fewer splits when the workspace is short; keys per split grow to keep covering max_context.
    const int fit =
        workspace == nullptr
            ? 1
            : int(std::min<size_t>(
                  s.splits, workspace_bytes / partial_bytes(tokens, heads, layout.head_dim, 1)));
    if (fit < s.splits) {
      const int keys_total = s.splits * s.keys;
      s.splits = std::max(1, fit);
      const int per = (keys_total + s.splits - 1) / s.splits;
      s.keys = (per + kTileKeys - 1) / kTileKeys * kTileKeys;
    }
  }
  dispatch_head_dim(layout.head_dim, "paged_attention_decode", [&](auto dim) {
    dispatch_alibi(alibi_slopes, [&](auto alibi) {
      launch<T, C, decltype(dim)::value, decltype(alibi)::value>(
          q, q_stride, k_cache, v_cache, block_tables, token_seq, token_pos, out, tokens, heads,
          scale, alibi_slopes, window, layout, s, workspace, stream);
    });
  });
}

#define LMX_INSTANTIATE(T, C)                                                                     \
  template void paged_attention_decode<T, C>(                                                     \
      const T*, int, const C*, const C*, const int32_t*, const int32_t*, const int32_t*, T*, int, \
      int, float, const float*, int, const PagedKvLayout&, int, void*, size_t, cudaStream_t);
LMX_KV_CACHE_TYPES_16BIT(LMX_INSTANTIATE)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
