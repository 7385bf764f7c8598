#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/paged_kv.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/rotary.cuh"
#include "kernels/rope_kv.h"

namespace lmx::kernels::cuda {
namespace {

using namespace detail;

// G adjacent values of T at p (plus G bias values when bias is given), in fp32: one load of
// G * sizeof(T) bytes each.
template <int G, typename T>
__device__ __forceinline__ void load_group(const T* p, const T* bias, float (&v)[G]) {
  const Pack<T, G> x = *reinterpret_cast<const Pack<T, G>*>(p);
#pragma unroll
  for (int i = 0; i < G; ++i) v[i] = to_f(x.v[i]);
  if (bias) {
    const Pack<T, G> b = *reinterpret_cast<const Pack<T, G>*>(bias);
#pragma unroll
    for (int i = 0; i < G; ++i) v[i] += to_f(b.v[i]);
  }
}

// Stores G values as E (T or the cache type C: from_f rounds once from fp32) with one store.
template <int G, typename E>
__device__ __forceinline__ void store_group(E* p, const float (&v)[G]) {
  Pack<E, G> x;
#pragma unroll
  for (int i = 0; i < G; ++i) x.v[i] = from_f<E>(v[i]);
  *reinterpret_cast<Pack<E, G>*>(p) = x;
}

// The same into the cache: each value divided by the cache's scale first (to_cache).
template <int G, typename C>
__device__ __forceinline__ void store_cache_group(C* p, const float (&v)[G], float scale) {
  Pack<C, G> x;
#pragma unroll
  for (int i = 0; i < G; ++i) x.v[i] = to_cache<C>(v[i], scale);
  *reinterpret_cast<Pack<C, G>*>(p) = x;
}

// Grid (tokens, unit blocks): blockIdx.x = token, one thread per work unit of G adjacent
// columns. Work units of a token: for each of the heads + kv_heads q/k heads, half / G groups of
// rotary pairs (columns c .. c + G and their partners c + half ..) then (head_dim - rotary_dim) / G
// pass-through groups; then kv_size / G v groups. G = 8 moves 16 bytes of T per access (the
// launcher picks it when the layout allows); G = 1 takes any layout. Spreading a token's units
// over blocks keeps a decode step of one token from running on a single SM. The cache (C) gets
// each value divided by L.scale.k / .v and rounded once from fp32 (to_cache: for KvFp8 the
// saturating E4M3 conversion).
template <typename T, typename C, int G>
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
  const int rotary_units = half / G, per_head = (D - half) / G;
  const int qk_units = (heads + L.kv_heads) * per_head;
  const int units = qk_units + kv_size / G;
  const int u = blockIdx.y * blockDim.x + threadIdx.x;
  if (u >= units) return;
  const int pos = token_pos[t];
  const int seq = token_seq[t];
  T* row = qkv + size_t(t) * qkv_stride;
  // Cache row of this token: [kv_heads, head_dim] at slot (block, pos % block_size).
  const size_t slot = seq >= 0 ? kv_slot(block_tables, L, seq, pos) : 0;
  auto bias_at = [&](int col) { return bias ? bias + col : nullptr; };
  float v[G];
  if (u < qk_units) {
    const int h = u / per_head, r = u - h * per_head;
    const int base = h * D;  // column of this head (k heads follow the q heads)
    const bool write_k = h >= heads && seq >= 0;
    if (r < rotary_units) {
      const int c0 = base + r * G, c1 = c0 + half;
      float w[G];
      load_group<G>(row + c0, bias_at(c0), v);
      load_group<G>(row + c1, bias_at(c1), w);
#pragma unroll
      for (int i = 0; i < G; ++i) {
        const float2 rotated = rotate_pair(v[i], w[i], rotary_sincos(float(pos), inv_freq[r * G + i]));
        v[i] = rotated.x;
        w[i] = rotated.y;
      }
      store_group<G>(row + c0, v);
      store_group<G>(row + c1, w);
      if (write_k) {
        store_cache_group<G>(k_cache + slot + (c0 - q_size), v, L.scale.k);
        store_cache_group<G>(k_cache + slot + (c1 - q_size), w, L.scale.k);
      }
    } else {
      const int col = base + rotary_dim + (r - rotary_units) * G;
      load_group<G>(row + col, bias_at(col), v);
      if (bias) store_group<G>(row + col, v);
      if (write_k) store_cache_group<G>(k_cache + slot + (col - q_size), v, L.scale.k);
    }
  } else {
    const int d = (u - qk_units) * G;
    const int col = q_size + kv_size + d;
    load_group<G>(row + col, bias_at(col), v);
    if (bias) store_group<G>(row + col, v);
    if (seq >= 0) store_cache_group<G>(v_cache + slot + d, v, L.scale.v);
  }
}

template <typename T, typename C, int G>
void launch_rope_write_kv(T* qkv, int qkv_stride, const T* qkv_bias, const int32_t* token_pos,
                          const float* inv_freq, int rotary_dim, int heads, C* k_cache,
                          C* v_cache, const int32_t* block_tables, const int32_t* token_seq,
                          int tokens, const PagedKvLayout& layout, cudaStream_t stream) {
  const int units = ((heads + layout.kv_heads) * (layout.head_dim - rotary_dim / 2) +
                     layout.kv_heads * layout.head_dim) / G;
  const int threads = std::min(256, (units + 31) / 32 * 32);
  const dim3 grid(unsigned(tokens), unsigned((units + threads - 1) / threads));
  pdl::launch_dependent(rope_write_kv_kernel<T, C, G>, grid, dim3(threads), 0, stream, qkv,
                        qkv_stride, qkv_bias, token_pos, inv_freq, rotary_dim, heads, k_cache,
                        v_cache, block_tables, token_seq, layout);
}

// Whether every access of the G = 8 kernel is whole and aligned: rotary pairs, heads and rows in
// groups of 8, and the pointers aligned to a group of their type.
template <typename T, typename C>
bool groups_of_8(const T* qkv, int qkv_stride, const T* bias, int rotary_dim, const C* k_cache,
                 const C* v_cache, const PagedKvLayout& layout) {
  auto aligned = [](const void* p, size_t bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
  };
  return rotary_dim % 16 == 0 && layout.head_dim % 8 == 0 && qkv_stride % 8 == 0 &&
         aligned(qkv, 8 * sizeof(T)) && aligned(bias, 8 * sizeof(T)) &&
         aligned(k_cache, 8 * sizeof(C)) && aligned(v_cache, 8 * sizeof(C));
}

}  // namespace

template <typename T, typename C>
void rope_write_kv(T* qkv, int qkv_stride, const T* qkv_bias, const int32_t* token_pos,
                   const float* inv_freq, int rotary_dim, int heads, C* k_cache, C* v_cache,
                   const int32_t* block_tables, const int32_t* token_seq, int tokens,
                   const PagedKvLayout& layout, cudaStream_t stream) {
  if (tokens == 0) return;
  if (!inv_freq) rotary_dim = 0;
  if (groups_of_8(qkv, qkv_stride, qkv_bias, rotary_dim, k_cache, v_cache, layout))
    launch_rope_write_kv<T, C, 8>(qkv, qkv_stride, qkv_bias, token_pos, inv_freq, rotary_dim,
                                  heads, k_cache, v_cache, block_tables, token_seq, tokens, layout,
                                  stream);
  else
    launch_rope_write_kv<T, C, 1>(qkv, qkv_stride, qkv_bias, token_pos, inv_freq, rotary_dim,
                                  heads, k_cache, v_cache, block_tables, token_seq, tokens, layout,
                                  stream);
}

#define LMX_INSTANTIATE(T, C)                                                                 \
  template void rope_write_kv<T, C>(T*, int, const T*, const int32_t*, const float*, int, int, \
                                    C*, C*, const int32_t*, const int32_t*, int,               \
                                    const PagedKvLayout&, cudaStream_t);
LMX_KV_CACHE_TYPES(LMX_INSTANTIATE)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
