// Split-K ("flash-decoding") paged attention: see kernels/attention.h and docs/attention.md.
//
// Grid (splits, kv_heads * head_chunks, tokens), 128 threads. One CTA streams the keys
// [begin, end) of one token's attended range for one kv head, in tiles of 32 positions gathered
// from the paged cache with cp.async (16-byte, zero-filled past the end, double-buffered), and
// serves every query head of the group (up to 2048 / head_dim of them) from that one copy:
//   QK: warp w scores heads w, w+4, ... ; lane = key of the tile (fp32 dot from shared memory).
//   online softmax per head in log2 domain (q pre-scaled by scale * log2(e)).
//   PV: each thread owns (head, pair of dims) items, fp32 accumulators in registers.
// One split: normalize and write out directly. Several: write fp32 partials (acc, m, l) to the
// workspace and let decode_reduce_kernel merge them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/attention.h"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/head_dim_dispatch.cuh"

namespace lmx::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kTileKeys = 32;                           // == warp size: lane = key in QK
constexpr int kMaxItems = 8;                            // (head, dim pair) accumulators per thread
constexpr int kMaxHeadDims = 2 * kThreads * kMaxItems;  // heads_per_cta * head_dim <= 2048
constexpr int kMaxSplits = 64;
#ifndef LMX_ATTN_DECODE_TARGET_CTAS            // tuning knob (bench builds variants with -D)
#define LMX_ATTN_DECODE_TARGET_CTAS (4 * 132)  // ~4 resident CTAs per SM on an H100 (132 SMs)
#endif
constexpr int kTargetCtas = LMX_ATTN_DECODE_TARGET_CTAS;
constexpr int kMinSplitKeys = 128;
constexpr float kLog2e = 1.4426950408889634f;

template <typename T>
struct Vec2;
template <>
struct Vec2<__half> {
  using type = __half2;
  static __device__ float2 to_float2(type v) { return __half22float2(v); }
  static __device__ type from_float2(float2 v) { return __float22half2_rn(v); }
};
template <>
struct Vec2<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static __device__ float2 to_float2(type v) { return __bfloat1622float2(v); }
  static __device__ type from_float2(float2 v) { return __float22bfloat162_rn(v); }
};


__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

struct Split {
  int splits, keys, head_chunks, heads_per_cta;
};

// Grid shape for one launch: a function of host ints that stay fixed for a captured graph.
Split plan(int tokens, int heads, int kv_heads, int head_dim, int max_context, int window) {
  Split s{};
  const int group = heads / kv_heads;
  const int max_per_cta = std::max(1, kMaxHeadDims / head_dim);
  s.head_chunks = (group + max_per_cta - 1) / max_per_cta;
  s.heads_per_cta = (group + s.head_chunks - 1) / s.head_chunks;
  int ctx = std::max(1, max_context);
  if (window > 0) ctx = std::min(ctx, window);
  const long base = long(std::max(tokens, 1)) * kv_heads * s.head_chunks;
  int splits = int(std::min<long>(kMaxSplits, (kTargetCtas + base - 1) / base));
  splits = std::min(splits, (ctx + kMinSplitKeys - 1) / kMinSplitKeys);
  s.splits = std::max(1, splits);
  const int per = (ctx + s.splits - 1) / s.splits;
  s.keys = (per + kTileKeys - 1) / kTileKeys * kTileKeys;
  return s;
}

size_t partial_bytes(int tokens, int heads, int head_dim, int splits) {
  return size_t(tokens) * heads * splits * (size_t(head_dim) + 2) * sizeof(float);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    decode_kernel(const T* __restrict__ q, int q_stride, const T* __restrict__ k_cache,
                  const T* __restrict__ v_cache, const int32_t* __restrict__ block_tables,
                  const int32_t* __restrict__ token_seq, const int32_t* __restrict__ token_pos,
                  T* __restrict__ out, float* __restrict__ ws_acc, float2* __restrict__ ws_ml,
                  int heads, float scale_log2, int window, PagedKvLayout L, int splits,
                  int split_keys, int head_chunks, int heads_per_cta) {
  constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte chunk
  constexpr int kChunks = D / kVec;     // chunks per row
  constexpr int kRow = D + kVec;        // padded row: conflict-free 16-byte reads down a column
  constexpr int kPairs = D / 2;
  constexpr int kMaxHeads = kMaxHeadDims / D;
  using T2 = typename Vec2<T>::type;

  __shared__ __align__(16) T ks[2][kTileKeys][kRow];
  __shared__ __align__(16) T vs[2][kTileKeys][kRow];
  __shared__ __align__(16) float qs[kMaxHeads][D];
  __shared__ float ps[kMaxHeads][kTileKeys];
  __shared__ float m_s[kMaxHeads], l_s[kMaxHeads], alpha_s[kMaxHeads];

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
      size_t off = 0;
      if (valid) {
        const size_t slot = size_t(table[p / L.block_size]) * L.block_size + p % L.block_size;
        off = (slot * L.kv_heads + kvh) * D + part * kVec;
      }
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
      const float4* krow = reinterpret_cast<const float4*>(&ks[st][lane][0]);
      for (int g = warp; g < gc; g += kThreads / 32) {
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const float4 raw = krow[c];
          const T2* k2 = reinterpret_cast<const T2*>(&raw);
          const float4* q4 = reinterpret_cast<const float4*>(&qs[g][c * kVec]);
#pragma unroll
          for (int e = 0; e < kVec / 4; ++e) {
            const float4 qv = q4[e];
            const float2 ka = Vec2<T>::to_float2(k2[2 * e]);
            const float2 kb = Vec2<T>::to_float2(k2[2 * e + 1]);
            s = fmaf(qv.x, ka.x, s);
            s = fmaf(qv.y, ka.y, s);
            s = fmaf(qv.z, kb.x, s);
            s = fmaf(qv.w, kb.y, s);
          }
        }
        s = valid ? s : -INFINITY;
        const float m_old = m_s[g];
        const float m_new = fmaxf(m_old, warp_max(s));  // finite: key p0 is always valid
        const float p = valid ? exp2f(s - m_new) : 0.0f;
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

    // acc = acc * alpha + P V   (invalid keys: p = 0 and V zero-filled, never NaN)
#pragma unroll
    for (int j = 0; j < kMaxItems; ++j) {
      const int i = tid + j * kThreads;
      if (i < gc * kPairs) {
        const int g = i / kPairs, dp = i % kPairs;
        const float alpha = alpha_s[g];
        float2 a = make_float2(acc[j].x * alpha, acc[j].y * alpha);
        const float4* p4 = reinterpret_cast<const float4*>(&ps[g][0]);
#pragma unroll
        for (int k4 = 0; k4 < kTileKeys / 4; ++k4) {
          const float4 pv = p4[k4];
          const float pk[4] = {pv.x, pv.y, pv.z, pv.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float2 v =
                Vec2<T>::to_float2(*reinterpret_cast<const T2*>(&vs[st][k4 * 4 + e][2 * dp]));
            a.x = fmaf(pk[e], v.x, a.x);
            a.y = fmaf(pk[e], v.y, a.y);
          }
        }
        acc[j] = a;
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
        const float inv = 1.0f / l_s[g];
        *reinterpret_cast<T2*>(&out[(size_t(t) * heads + h) * D + 2 * dp]) =
            Vec2<T>::from_float2(make_float2(acc[j].x * inv, acc[j].y * inv));
      } else {
        const size_t row = (size_t(t) * heads + h) * splits + split;
        *reinterpret_cast<float2*>(&ws_acc[row * D + 2 * dp]) = acc[j];
        if (dp == 0) ws_ml[row] = make_float2(m_s[g], l_s[g]);
      }
    }
  }
}

// Merge the splits of one (token, head): out = sum_s 2^(m_s - M) acc_s / sum_s 2^(m_s - M) l_s.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    decode_reduce_kernel(const float* __restrict__ ws_acc, const float2* __restrict__ ws_ml,
                         const int32_t* __restrict__ token_pos, T* __restrict__ out, int heads,
                         int window, int splits, int split_keys) {
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
      const float w = exp2f(ml.x - m);
      w_s[s] = w;
      l += w * ml.y;
    }
    l = warp_sum(l);
    if (threadIdx.x == 0) inv_l = 1.0f / l;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float o = 0.0f;
    for (int s = 0; s < active; ++s) o = fmaf(w_s[s], ws_acc[(row0 + s) * D + d], o);
    out[(size_t(t) * heads + h) * D + d] = T(o * inv_l);
  }
}

template <typename T, int D>
void launch(const T* q, int q_stride, const T* k_cache, const T* v_cache,
            const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos, T* out,
            int tokens, int heads, float scale, int window, const PagedKvLayout& L, const Split& s,
            void* workspace, cudaStream_t stream) {
  float* ws_acc = static_cast<float*>(workspace);
  float2* ws_ml = s.splits > 1
                      ? reinterpret_cast<float2*>(ws_acc + size_t(tokens) * heads * s.splits * D)
                      : nullptr;
  const dim3 grid(s.splits, L.kv_heads * s.head_chunks, tokens);
  decode_kernel<T, D><<<grid, kThreads, 0, stream>>>(
      q, q_stride, k_cache, v_cache, block_tables, token_seq, token_pos, out, ws_acc, ws_ml, heads,
      scale * kLog2e, window, L, s.splits, s.keys, s.head_chunks, s.heads_per_cta);
  if (s.splits > 1)
    decode_reduce_kernel<T, D><<<dim3(heads, tokens), kThreads, 0, stream>>>(
        ws_acc, ws_ml, token_pos, out, heads, window, s.splits, s.keys);
}

}  // namespace

size_t paged_attention_decode_workspace_bytes(int max_tokens, int heads, int kv_heads, int head_dim,
                                              int max_context) {
  size_t bytes = 0;
  for (int t = 1; t <= max_tokens; ++t) {
    const Split s = plan(t, heads, kv_heads, head_dim, max_context, 0);
    if (s.splits > 1) bytes = std::max(bytes, partial_bytes(t, heads, head_dim, s.splits));
  }
  return bytes;
}

template <typename T>
void paged_attention_decode(const T* q, int q_stride, const T* k_cache, const T* v_cache,
                            const int32_t* block_tables, const int32_t* token_seq,
                            const int32_t* token_pos, T* out, int tokens, int heads, float scale,
                            int window, const PagedKvLayout& layout, int max_context,
                            void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (tokens <= 0 || heads <= 0) return;
  Split s = plan(tokens, heads, layout.kv_heads, layout.head_dim, max_context, window);
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
    launch<T, decltype(dim)::value>(q, q_stride, k_cache, v_cache, block_tables, token_seq,
                                    token_pos, out, tokens, heads, scale, window, layout, s,
                                    workspace, stream);
  });
}

#define LMX_INSTANTIATE(T)                                                                        \
  template void paged_attention_decode<T>(                                                        \
      const T*, int, const T*, const T*, const int32_t*, const int32_t*, const int32_t*, T*, int, \
      int, float, int, const PagedKvLayout&, int, void*, size_t, cudaStream_t);
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
