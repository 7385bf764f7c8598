#include "kernels/cuda/common.cuh"
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
// blocks keeps a decode step of one token from running on a single SM.
template <typename T>
__global__ void rope_write_kv_kernel(T* qkv, int qkv_stride, const T* __restrict__ bias,
                                     const int32_t* __restrict__ token_pos,
                                     const float* __restrict__ inv_freq, int rotary_dim, int heads,
                                     T* __restrict__ k_cache, T* __restrict__ v_cache,
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
        const T ra = from_f<T>(rotated.x), rb = from_f<T>(rotated.y);
        row[c0] = ra;
        row[c1] = rb;
        if (is_k && seq >= 0) {
          k_cache[slot + (c0 - q_size)] = ra;
          k_cache[slot + (c1 - q_size)] = rb;
        }
      } else {
        const int col = base + rotary_dim + (r - half);
        T v = row[col];
        if (bias) {
          v = from_f<T>(to_f(v) + to_f(bias[col]));
          row[col] = v;
        }
        if (is_k && seq >= 0) k_cache[slot + (col - q_size)] = v;
      }
    } else {
      const int d = u - qk_units;
      const int col = q_size + kv_size + d;
      T v = row[col];
      if (bias) {
        v = from_f<T>(to_f(v) + to_f(bias[col]));
        row[col] = v;
      }
      if (seq >= 0) v_cache[slot + d] = v;
    }
  }
}

}  // namespace

template <typename T>
void rope_write_kv(T* qkv, int qkv_stride, const T* qkv_bias, const int32_t* token_pos,
                   const float* inv_freq, int rotary_dim, int heads, T* k_cache, T* v_cache,
                   const int32_t* block_tables, const int32_t* token_seq, int tokens,
                   const PagedKvLayout& layout, cudaStream_t stream) {
  if (tokens == 0) return;
  if (!inv_freq) rotary_dim = 0;
  const int units = (heads + layout.kv_heads) * (layout.head_dim - rotary_dim / 2) +
                    layout.kv_heads * layout.head_dim;
  const int threads = std::min(256, (units + 31) / 32 * 32);
  const dim3 grid(unsigned(tokens), unsigned((units + threads - 1) / threads));
  pdl::launch_dependent(rope_write_kv_kernel<T>, dim3(grid), dim3(threads), 0, stream, qkv,
                        qkv_stride, qkv_bias, token_pos, inv_freq, rotary_dim, heads, k_cache,
                        v_cache, block_tables, token_seq, layout);
}

#define LMX_INSTANTIATE(T)                                                                      \
  template void rope_write_kv<T>(T*, int, const T*, const int32_t*, const float*, int, int, T*, \
                                 T*, const int32_t*, const int32_t*, int, const PagedKvLayout&, \
                                 cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
