// Flash-attention-2 style prefill over the paged KV cache: see kernels/attention.h and
// docs/attention.md.
//
// Grid (q tiles, heads, chunks), 128 threads = 4 warps x 16 query rows. Per CTA: a 64-row Q tile
// of one head in registers (ldmatrix), then 64-key tiles of K and V gathered from the paged cache
// with cp.async (16-byte, zero-filled outside [min lo, max pos] of the tile's rows,
// double-buffered, rows padded by 16 bytes so ldmatrix is conflict-free).
//   S = Q K^T and O += P V on tensor cores (mma.sync m16n8k16, fp32 accumulators); P stays in
//   registers (the accumulator layout of two n8 tiles is the A layout of one k16 step);
//   online softmax in log2 domain, masks only on tiles that cross a row's [lo, pos] edge.
// Q tiles run heaviest first (the last tile of a causal chunk has the most keys).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <stdexcept>
#include <string>

#include "kernels/attention.h"

namespace lmx::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kBM = 64;  // query rows per CTA (16 per warp)
constexpr int kBN = 64;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_size = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(src_size));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

template <typename T> struct Mma;
template <> struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};
template <> struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};

template <int D>
constexpr int smem_bytes() {
  return (kBM + 4 * kBN) * (D + 8) * 2;
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 2)
    prefill_kernel(const T* __restrict__ q, int q_stride, const T* __restrict__ k_cache,
                   const T* __restrict__ v_cache, const int32_t* __restrict__ block_tables,
                   const int32_t* __restrict__ token_seq, const int32_t* __restrict__ token_pos,
                   const int32_t* __restrict__ cu_q, T* __restrict__ out, int heads,
                   float scale_log2, int window, PagedKvLayout L) {
  constexpr int kRow = D + 8;  // padded row (elements): 16 bytes of padding
  constexpr int kChunks = D / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);  // [kBM][kRow]
  T* ks = qs + kBM * kRow;                 // [2][kBN][kRow]
  T* vs = ks + 2 * kBN * kRow;             // [2][kBN][kRow]
  __shared__ int red[2][4];

  const int chunk = blockIdx.z;
  const int h = blockIdx.y;
  const int qb = cu_q[chunk], qe = cu_q[chunk + 1];
  const int q0 = qb + (gridDim.x - 1 - blockIdx.x) * kBM;  // heaviest tiles first
  if (q0 >= qe) return;
  const int rows = min(kBM, qe - q0);
  const int kvh = h / (heads / L.kv_heads);
  const int32_t* table = block_tables + size_t(token_seq[q0]) * L.max_blocks_per_seq;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  // Key range of the tile: [min lo, max pos]; fully unmasked keys: [max lo, min pos].
  if (warp < 2) {
    const int r = tid;
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
  }
  // This thread's two rows (fragment rows lane/4 and lane/4 + 8 of its warp's 16).
  const int r0 = warp * 16 + lane / 4, r1 = r0 + 8;
  const int pos0 = r0 < rows ? token_pos[q0 + r0] : -1;  // -1: every key masked
  const int pos1 = r1 < rows ? token_pos[q0 + r1] : -1;
  const int lo0 = window > 0 ? max(0, pos0 - window + 1) : 0;
  const int lo1 = window > 0 ? max(0, pos1 - window + 1) : 0;
  __syncthreads();
  const int kmin = min(red[0][0], red[1][0]);
  const int kmax = max(red[0][1], red[1][1]);
  const int full_lo = max(red[0][2], red[1][2]);
  const int full_hi = min(red[0][3], red[1][3]);

  for (int c = tid; c < kBM * kChunks; c += kThreads) {
    const int r = c / kChunks, part = c % kChunks;
    const bool valid = r < rows;
    const T* src = valid ? q + size_t(q0 + r) * q_stride + size_t(h) * D + part * 8 : q;
    cp_async16(qs + r * kRow + part * 8, src, valid);
  }
  auto load_tile = [&](int kt, int st) {
    T* kd = ks + st * kBN * kRow;
    T* vd = vs + st * kBN * kRow;
    for (int c = tid; c < kBN * kChunks; c += kThreads) {
      const int r = c / kChunks, part = c % kChunks;
      const int p = kt * kBN + r;
      const bool valid = p >= kmin && p <= kmax;
      size_t off = 0;
      if (valid) {
        const size_t slot = size_t(table[p / L.block_size]) * L.block_size + p % L.block_size;
        off = (slot * L.kv_heads + kvh) * D + part * 8;
      }
      cp_async16(kd + r * kRow + part * 8, k_cache + off, valid);
      cp_async16(vd + r * kRow + part * 8, v_cache + off, valid);
    }
    cp_async_commit();
  };

  const int kt_begin = kmin / kBN, kt_end = kmax / kBN;
  load_tile(kt_begin, 0);  // the same group carries the Q tile

  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  for (int kt = kt_begin; kt <= kt_end; ++kt) {
    const int st = (kt - kt_begin) & 1;
    if (kt < kt_end) {
      load_tile(kt + 1, st ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (kt == kt_begin) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrix_x4(qf[kk], qs + (warp * 16 + lane % 16) * kRow + kk * 16 + (lane / 16) * 8);
    }
    const T* kb = ks + st * kBN * kRow;
    const T* vb = vs + st * kBN * kRow;

    // S = Q K^T: [16 rows per warp, 64 keys] in 8 n-tiles.
    float s[kBN / 8][4];
#pragma unroll
    for (int i = 0; i < kBN / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kBN / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, kb + (np * 16 + (lane / 16) * 8 + lane % 8) * kRow + kk * 16 +
                           ((lane / 8) % 2) * 8);
        Mma<T>::run(s[2 * np], qf[kk], b[0], b[1]);
        Mma<T>::run(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    // Scale, mask, online softmax (row r0: s[..][0..1], row r1: s[..][2..3]).
    const int p0 = kt * kBN;
    const bool need_mask = p0 < full_lo || p0 + kBN - 1 > full_hi;
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float x0 = s[nt][e] * scale_log2, x1 = s[nt][2 + e] * scale_log2;
        if (need_mask) {
          const int p = p0 + nt * 8 + (lane % 4) * 2 + e;
          if (p < lo0 || p > pos0) x0 = -INFINITY;
          if (p < lo1 || p > pos1) x1 = -INFINITY;
        }
        s[nt][e] = x0;
        s[nt][2 + e] = x1;
        mx0 = fmaxf(mx0, x0);
        mx1 = fmaxf(mx1, x1);
      }
    }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float mu0 = mn0 == -INFINITY ? 0.0f : mn0;  // fully masked row: no NaN
    const float mu1 = mn1 == -INFINITY ? 0.0f : mn1;
    const float a0 = exp2f(m0 - mu0), a1 = exp2f(m1 - mu1);
    m0 = mn0;
    m1 = mn1;
    float rs0 = 0.0f, rs1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[nt][e] = exp2f(s[nt][e] - mu0);
        s[nt][2 + e] = exp2f(s[nt][2 + e] - mu1);
        rs0 += s[nt][e];
        rs1 += s[nt][2 + e];
      }
    }
    l0 = l0 * a0 + rs0;  // per-thread partial sums; the quad is summed at the end
    l1 = l1 * a1 + rs1;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      o[dn][0] *= a0;
      o[dn][1] *= a0;
      o[dn][2] *= a1;
      o[dn][3] *= a1;
    }

    // O += P V: P from registers, V^T fragments by ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = Mma<T>::pack(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = Mma<T>::pack(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = Mma<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = Mma<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vb + (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * kRow + dp * 16 +
                                 (lane / 16) * 8);
        Mma<T>::run(o[2 * dp], pa, b[0], b[1]);
        Mma<T>::run(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // stage st is reloaded by the next iteration
  }

#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  const size_t ld = size_t(heads) * D;
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) {
    const int d = h * D + dn * 8 + (lane % 4) * 2;
    if (r0 < rows)
      *reinterpret_cast<uint32_t*>(out + size_t(q0 + r0) * ld + d) =
          Mma<T>::pack(o[dn][0] * inv0, o[dn][1] * inv0);
    if (r1 < rows)
      *reinterpret_cast<uint32_t*>(out + size_t(q0 + r1) * ld + d) =
          Mma<T>::pack(o[dn][2] * inv1, o[dn][3] * inv1);
  }
}

template <typename T, int D>
void launch(const T* q, int q_stride, const T* k_cache, const T* v_cache,
            const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
            const int32_t* cu_q, int num_seqs, int max_q_len, T* out, int heads, float scale,
            int window, const PagedKvLayout& L, cudaStream_t stream) {
  constexpr int bytes = smem_bytes<D>();
  // Raised on every launch (cheap, per device, allowed during graph capture).
  cudaFuncSetAttribute(prefill_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  const dim3 grid((max_q_len + kBM - 1) / kBM, heads, num_seqs);
  prefill_kernel<T, D><<<grid, kThreads, bytes, stream>>>(q, q_stride, k_cache, v_cache,
                                                          block_tables, token_seq, token_pos,
                                                          cu_q, out, heads, scale * kLog2e,
                                                          window, L);
}

}  // namespace

template <typename T>
void paged_attention_prefill(const T* q, int q_stride, const T* k_cache, const T* v_cache,
                             const int32_t* block_tables, const int32_t* token_seq,
                             const int32_t* token_pos, const int32_t* cu_q, int num_seqs,
                             int max_q_len, T* out, int heads, float scale, int window,
                             const PagedKvLayout& layout, cudaStream_t stream) {
  if (num_seqs <= 0 || max_q_len <= 0 || heads <= 0) return;
#define LMX_PREFILL_CASE(D_)                                                                    \
  case D_:                                                                                      \
    launch<T, D_>(q, q_stride, k_cache, v_cache, block_tables, token_seq, token_pos, cu_q,      \
                  num_seqs, max_q_len, out, heads, scale, window, layout, stream);              \
    break;
  switch (layout.head_dim) {
    LMX_PREFILL_CASE(64)
    LMX_PREFILL_CASE(80)
    LMX_PREFILL_CASE(96)
    LMX_PREFILL_CASE(128)
    default:
      throw std::invalid_argument("paged_attention_prefill: head_dim " +
                                  std::to_string(layout.head_dim) +
                                  " not supported (64, 80, 96, 128)");
  }
#undef LMX_PREFILL_CASE
}

#define LMX_INSTANTIATE(T)                                                                       \
  template void paged_attention_prefill<T>(const T*, int, const T*, const T*, const int32_t*,    \
                                           const int32_t*, const int32_t*, const int32_t*, int,  \
                                           int, T*, int, float, int, const PagedKvLayout&,       \
                                           cudaStream_t);
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
