#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/paged_kv.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/rotary.cuh"
#include "kernels/rope_kv.h"

namespace lmx::kernels::cuda {
namespace {

using namespace detail;

// Grid (tokens, unit blocks): blockIdx.x = token, one thread per work unit. Work units of a
// token: for each of the heads + kv_heads q/k heads, `half` rotary pairs then
// head_dim - rotary_dim pass-through dims; then kv_size v dims. Spreading a token's units over
// blocks keeps a decode step of one token from running on a single SM. The cache (C) gets each
// value rounded once from fp32 (from_f: for KvFp8 the saturating E4M3 conversion).
template <typename T, typename C>
__global__ void rope_write_kv_kernel(T* qkv, int qkv_stride, const T* __restrict__ bias,
                                     const int32_t* __restrict__ token_pos,
                                     const float* __restrict__ inv_freq, int rotary_dim, int heads,
                                     C* __restrict__ k_cache, C* __restrict__ v_cache,
                                     const int32_t* __restrict__ block_tables,
                                     const int32_t* __restrict__ token_seq, PagedKvLayout L) {
  pdl::wait_for_primary();
  pdl::allow_dependents();
  const int t = blockIdx.x;
  const int D = L.head_dim, half = rotary_dim / 2;
  const int q_size = heads * D, kv_size = L.kv_heads * D;
  const int pos = token_pos[t];
  const int seq = token_seq[t];
  T* row = qkv + size_t(t) * qkv_stride;
  // Cache row of this token: [kv_heads, head_dim] at slot (block, pos % block_size).
  const size_t slot = seq >= 0 ? kv_slot(block_tables, L, seq, pos) : 0;
  const int per_head = D - half;
  const int qk_units = (heads + L.kv_heads) * per_head;
  const int units = qk_units + kv_size;
  const int u = blockIdx.y * blockDim.x + threadIdx.x;
  if (u < units) {
    if (u < qk_units) {
      const int h = u / per_head, r = u - h * per_head;
      const int base = h * D;  // column of this head (k heads follow the q heads)
      const bool is_k = h >= heads;
      if (r < half) {
        const int c0 = base + r, c1 = c0 + half;
        float a = to_f(row[c0]), b = to_f(row[c1]);
        if (bias) {
          a += to_f(bias[c0]);
          b += to_f(bias[c1]);
        }
        const float2 rotated = rotate_pair(a, b, rotary_sincos(float(pos), inv_freq[r]));
        row[c0] = from_f<T>(rotated.x);
        row[c1] = from_f<T>(rotated.y);
        if (is_k && seq >= 0) {
          k_cache[slot + (c0 - q_size)] = from_f<C>(rotated.x);
          k_cache[slot + (c1 - q_size)] = from_f<C>(rotated.y);
        }
      } else {
        const int col = base + rotary_dim + (r - half);
        float v = to_f(row[col]);
        if (bias) {
          v += to_f(bias[col]);
          row[col] = from_f<T>(v);
        }
        if (is_k && seq >= 0) k_cache[slot + (col - q_size)] = from_f<C>(v);
      }
    } else {
      const int d = u - qk_units;
      const int col = q_size + kv_size + d;
      float v = to_f(row[col]);
      if (bias) {
        v += to_f(bias[col]);
        row[col] = from_f<T>(v);
      }
      if (seq >= 0) v_cache[slot + d] = from_f<C>(v);
    }
  }
}

}  // namespace

template <typename T, typename C>
void rope_write_kv(T* qkv, int qkv_stride, const T* qkv_bias, const int32_t* token_pos,
                   const float* inv_freq, int rotary_dim, int heads, C* k_cache, C* v_cache,
                   const int32_t* block_tables, const int32_t* token_seq, int tokens,
                   const PagedKvLayout& layout, cudaStream_t stream) {
  if (tokens == 0) return;
  if (!inv_freq) rotary_dim = 0;
  const int units = (heads + layout.kv_heads) * (layout.head_dim - rotary_dim / 2) +
                    layout.kv_heads * layout.head_dim;
  const int threads = std::min(256, (units + 31) / 32 * 32);
  const dim3 grid(unsigned(tokens), unsigned((units + threads - 1) / threads));
  pdl::launch_dependent(rope_write_kv_kernel<T, C>, dim3(grid), dim3(threads), 0, stream, qkv,
                        qkv_stride, qkv_bias, token_pos, inv_freq, rotary_dim, heads, k_cache,
                        v_cache, block_tables, token_seq, layout);
}

#define LMX_INSTANTIATE(T, C)                                                                 \
  template void rope_write_kv<T, C>(T*, int, const T*, const int32_t*, const float*, int, int, \
                                    C*, C*, const int32_t*, const int32_t*, int,               \
                                    const PagedKvLayout&, cudaStream_t);
LMX_KV_CACHE_TYPES(LMX_INSTANTIATE)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
