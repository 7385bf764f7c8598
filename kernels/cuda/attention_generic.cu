// Paged attention for any head_dim (<= 256) and any batch shape: one warp per (token, head),
// online softmax over the token's visible keys. The generic path for shapes the tuned kernels
// (attention_decode.cu, attention_prefill.cu) do not cover, e.g. the tiny test models' head
// dims of 8 and 16; correctness first, speed is the tuned kernels' job. ALIBI: the score of key p
// gets slope[h] * (p - pos) (kernels/attention.h). The cache's scales: K's folded into the score
// scale by the launcher, V's multiplied into the output.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/attention.h"
#include "kernels/cuda/head_dim_dispatch.cuh"
#include "kernels/cuda/kv_types.cuh"

namespace lmx::kernels::cuda {
namespace {

constexpr int kMaxDimPerLane = 8;  // head_dim <= 32 * 8

template <typename T, typename C, bool ALIBI>
__global__ void generic_attention_kernel(
    const T* __restrict__ q, int q_stride, const C* __restrict__ k_cache,
    const C* __restrict__ v_cache, const int32_t* __restrict__ block_tables,
    const int32_t* __restrict__ token_seq, const int32_t* __restrict__ token_pos,
    T* __restrict__ out, int tokens, int heads, float scale, const float* __restrict__ alibi_slopes,
    int window, PagedKvLayout L) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= tokens * heads) return;
  const int t = warp / heads, h = warp % heads;
  const int D = L.head_dim;
  const int kvh = h / (heads / L.kv_heads);
  const int32_t* table = block_tables + size_t(token_seq[t]) * L.max_blocks_per_seq;
  const int pos = token_pos[t];
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const float slope = ALIBI ? alibi_slopes[h] : 0.0f;

  float qv[kMaxDimPerLane], acc[kMaxDimPerLane];
  for (int i = 0; i < kMaxDimPerLane; ++i) {
    const int d = lane + 32 * i;
    qv[i] = d < D ? float(q[size_t(t) * q_stride + size_t(h) * D + d]) : 0.0f;
    acc[i] = 0.0f;
  }
  float running_max = -INFINITY, denom = 0.0f;
  for (int p = lo; p <= pos; ++p) {
    const size_t base = ((size_t(table[p / L.block_size]) * L.block_size + p % L.block_size) *
                             L.kv_heads + kvh) * D;
    float dot = 0.0f;
    for (int i = 0; i < kMaxDimPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < D) dot += qv[i] * float(k_cache[base + d]);
    }
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    float s = dot * scale;
    if constexpr (ALIBI) s += alibi_bias(slope, p, pos);
    const float new_max = fmaxf(running_max, s);
    const float correction = __expf(running_max - new_max);
    const float w = __expf(s - new_max);
    denom = denom * correction + w;
    for (int i = 0; i < kMaxDimPerLane; ++i) {
      const int d = lane + 32 * i;
      acc[i] = acc[i] * correction + (d < D ? w * float(v_cache[base + d]) : 0.0f);
    }
    running_max = new_max;
  }
  for (int i = 0; i < kMaxDimPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < D) out[(size_t(t) * heads + h) * D + d] = T(acc[i] / denom * L.scale.v);
  }
}

}  // namespace

template <typename T, typename C>
void paged_attention_generic(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                             const int32_t* block_tables, const int32_t* token_seq,
                             const int32_t* token_pos, T* out, int tokens, int heads, float scale,
                             const float* alibi_slopes, int window, const PagedKvLayout& layout,
                             cudaStream_t stream) {
  if (tokens == 0) return;
  const int warps = tokens * heads, per_block = 4;
  dispatch_alibi(alibi_slopes, [&](auto alibi) {
    generic_attention_kernel<T, C, decltype(alibi)::value>
        <<<(warps + per_block - 1) / per_block, 32 * per_block, 0, stream>>>(
            q, q_stride, k_cache, v_cache, block_tables, token_seq, token_pos, out, tokens, heads,
            scale * layout.scale.k, alibi_slopes, window, layout);
  });
}

#define LMX_INSTANTIATE(T, C)                                                                     \
  template void paged_attention_generic<T, C>(                                                    \
      const T*, int, const C*, const C*, const int32_t*, const int32_t*, const int32_t*, T*, int, \
      int, float, const float*, int, const PagedKvLayout&, cudaStream_t);
LMX_KV_CACHE_TYPES(LMX_INSTANTIATE)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
