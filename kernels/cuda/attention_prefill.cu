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
// An fp8 cache (C = KvFp8) cannot feed ldmatrix: its K/V tiles land as bytes in a staging area
// (cp.async, 16-byte pieces of 16 dims; the next tile's copies are issued before this tile's
// math) and are widened to T into the one K/V stage the math reads after it. That leaves room for
// 3 CTAs an SM (64-row tiles; Q fragments re-read from shared memory to fit the registers).
// Head_dim 256 (GPT-J, Gemma): 64-row tiles only and 32-key tiles (kKeyTile), 2 CTAs an SM: 101 KB
// of shared memory (fp8: 84 KB) and 255 registers (fp8: ~238), of which 128 hold O.
// ALiBi (template bool ALIBI): the score of key p in row r gets slope[h] * log2(e) * (p - pos_r)
// in the log2 domain before the mask and the online softmax's max / exp2.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/gpu_properties.h"
#include "kernels/cuda/attention_prefill_tile.cuh"
#include "kernels/cuda/attention_prefill_wgmma.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/head_dim_dispatch.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/mma.cuh"

namespace lmx::kernels::cuda {
namespace {

constexpr int kThreads = 128;
// Keys per K/V tile: 64; 32 at head_dim 256, where 64-key tiles would take 169 KB of shared memory
// (Q + double-buffered K/V) and leave room for one CTA an SM (32 keys: 101 KB, 2 CTAs).
template <int D>
constexpr int kKeyTile = D > 128 ? 32 : 64;

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

// MT: 16-row m-tiles per warp (query rows per CTA = 64 * MT). MT = 2 halves the shared-memory
// reads of K and V per FLOP (each fragment feeds two mmas) but needs ~255 registers, so its Q
// fragments are re-read from shared memory (QREG = false); still 2 CTAs of 4 warps per SM.
// K/V stages in T: two (cp.async double buffering), or one beside the fp8 staging bytes.
template <typename C>
constexpr int kStages = kIsFp8<C> ? 1 : 2;

template <typename C, int D, int MT>
constexpr int smem_bytes() {
  constexpr int kBN = kKeyTile<D>;
  const int staging = kIsFp8<C> ? 2 * kBN * D : 0;  // K and V bytes of the next tile
  return (64 * MT + 2 * kStages<C> * kBN) * (D + 8) * 2 + staging;
}

// Resident CTAs an SM the registers are budgeted for. Head_dim 256 (MT = 1 only): 2, as many as
// its shared memory allows (101 KB, fp8 84 KB), for the 128 fp32 O accumulators a thread holds.
template <typename C, int D, int MT>
constexpr int kMinCtas = MT == 2     ? 1
                         : D > 128   ? 2
                         : kIsFp8<C> ? 3
                                     : 2;

template <typename T, typename C, int D, int MT, bool QREG, bool ALIBI>
__global__ void __launch_bounds__(kThreads, kMinCtas<C, D, MT>)
    prefill_kernel(const T* __restrict__ q, int q_stride, const C* __restrict__ k_cache,
                   const C* __restrict__ v_cache, const int32_t* __restrict__ block_tables,
                   const int32_t* __restrict__ token_seq, const int32_t* __restrict__ token_pos,
                   const int32_t* __restrict__ cu_q, T* __restrict__ out, int heads,
                   float scale_log2, const float* __restrict__ alibi_slopes, int window,
                   PagedKvLayout L) {
  constexpr int kBN = kKeyTile<D>;
  constexpr int kRow = D + 8;  // padded row (elements): 16 bytes of padding
  constexpr int kChunks = D / 8;
  constexpr int kBM = 64 * MT;  // query rows per CTA
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);  // [kBM][kRow]
  T* ks = qs + kBM * kRow;                 // [kStages][kBN][kRow]
  T* vs = ks + kStages<C> * kBN * kRow;    // [kStages][kBN][kRow]
  C* k_bytes = reinterpret_cast<C*>(vs + kStages<C> * kBN * kRow);  // fp8: [kBN][D]
  C* v_bytes = k_bytes + kBN * D;                                     // fp8: [kBN][D]
  __shared__ int red[kThreads / 32][4];

  const prefill::QueryTile tile =
      prefill::query_tile<kBM>(cu_q, token_seq, block_tables, heads, L);
  if (tile.rows == 0) return;
  const int h = blockIdx.y, q0 = tile.q0, rows = tile.rows, kvh = tile.kvh;
  const int32_t* const table = tile.table;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const float slope = ALIBI ? alibi_slopes[h] * prefill::kLog2e : 0.0f;  // ALiBi, log2 domain

  // This thread's rows: per m-tile, fragment rows lane/4 and lane/4 + 8 of its warp's 16.
  const prefill::KeyRange keys =
      prefill::key_range<kThreads / 32>(token_pos, q0, rows, window, red);
  prefill::Rows rw[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) rw[mt].init(token_pos, q0, rows, (warp * MT + mt) * 16, window);
  const int kmin = keys.kmin, kmax = keys.kmax;

  for (int c = tid; c < kBM * kChunks; c += kThreads) {
    const int r = c / kChunks, part = c % kChunks;
    const bool valid = r < rows;
    const T* src = valid ? q + size_t(q0 + r) * q_stride + size_t(h) * D + part * 8 : q;
    cp_async16(qs + r * kRow + part * 8, src, valid);
  }
  // Key r of tile kt, from dim `col` on: its element offset in the cache, or -1 outside
  // [kmin, kmax] (zero-filled).
  auto cache_offset = [&](int kt, int r, int col) -> long {
    const int p = kt * kBN + r;
    if (p < kmin || p > kmax) return -1;
    const size_t slot = size_t(table[p / L.block_size]) * L.block_size + p % L.block_size;
    return long((slot * L.kv_heads + kvh) * D + col);
  };
  // A tile's 16-byte pieces, piece c = (key c / per_row, the piece_elems dims from
  // (c % per_row) * piece_elems), copied to kd / vd at (key, dim) -> key * row + dim.
  auto copy_tile = [&](int kt, auto* kd, auto* vd, int piece_elems, int row) {
    const int per_row = D / piece_elems;
    for (int c = tid; c < kBN * per_row; c += kThreads) {
      const int r = c / per_row, col = (c % per_row) * piece_elems;
      const long off = cache_offset(kt, r, col);
      cp_async16(kd + r * row + col, k_cache + (off < 0 ? 0 : off), off >= 0);
      cp_async16(vd + r * row + col, v_cache + (off < 0 ? 0 : off), off >= 0);
    }
    cp_async_commit();
  };
  // C = T: straight into stage st. C = KvFp8: into the staging bytes (16 dims a piece).
  auto load_tile = [&](int kt, int st) {
    if constexpr (kIsFp8<C>)
      copy_tile(kt, k_bytes, v_bytes, 16, D);
    else
      copy_tile(kt, ks + st * kBN * kRow, vs + st * kBN * kRow, 8, kRow);
  };
  // C = KvFp8: the staging bytes widened to T into the stage. Each thread widens the pieces it
  // copied (copy_tile's c = tid, tid + kThreads, ...), so only its own copies need to have landed.
  auto widen_tile = [&]() {
    constexpr int per_row = D / 16;
    for (int c = tid; c < kBN * per_row; c += kThreads) {
      const int at = (c / per_row) * kRow + (c % per_row) * 16;
      const uint4 kb = *reinterpret_cast<const uint4*>(k_bytes + c * 16);
      const uint4 vb = *reinterpret_cast<const uint4*>(v_bytes + c * 16);
      *reinterpret_cast<uint4*>(ks + at) = widen_fp8x8<T>(make_uint2(kb.x, kb.y));
      *reinterpret_cast<uint4*>(ks + at + 8) = widen_fp8x8<T>(make_uint2(kb.z, kb.w));
      *reinterpret_cast<uint4*>(vs + at) = widen_fp8x8<T>(make_uint2(vb.x, vb.y));
      *reinterpret_cast<uint4*>(vs + at + 8) = widen_fp8x8<T>(make_uint2(vb.z, vb.w));
    }
  };

  const int kt_begin = kmin / kBN, kt_end = kmax / kBN;
  load_tile(kt_begin, 0);  // the same group carries the Q tile
  if constexpr (kIsFp8<C>) {
    cp_async_wait<0>();
    widen_tile();
  }

  const T* qw = qs + (warp * MT * 16 + lane % 16) * kRow + (lane / 16) * 8;  // ldmatrix A rows
  uint32_t qf[QREG ? MT : 1][QREG ? D / 16 : 1][4];  // Q fragments (QREG only)
  float o[MT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;

  for (int kt = kt_begin; kt <= kt_end; ++kt) {
    const int st = kStages<C> == 1 ? 0 : (kt - kt_begin) & 1;
    if constexpr (kIsFp8<C>) {
      if (kt < kt_end) load_tile(kt + 1, 0);  // staging bytes, landing during this tile's math
    } else if (kt < kt_end) {
      load_tile(kt + 1, st ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if constexpr (QREG) {
      if (kt == kt_begin) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk)
            ldmatrix_x4(qf[mt][kk], qw + mt * 16 * kRow + kk * 16);
      }
    }
    const T* kb = ks + st * kBN * kRow;
    const T* vb = vs + st * kBN * kRow;

    // S = Q K^T: per m-tile [16 rows, kBN keys] in kBN / 8 n-tiles; each K fragment feeds MT mmas.
    float s[MT][kBN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < kBN / 8; ++i)
        s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qk[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (QREG) {
#pragma unroll
          for (int e = 0; e < 4; ++e) qk[mt][e] = qf[mt][kk][e];
        } else {
          ldmatrix_x4(qk[mt], qw + mt * 16 * kRow + kk * 16);
        }
      }
#pragma unroll
      for (int np = 0; np < kBN / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4(
            b, kb + (np * 16 + (lane / 16) * 8 + lane % 8) * kRow + kk * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_m16n8k16<T>(s[mt][2 * np], qk[mt], b[0], b[1]);
          mma_m16n8k16<T>(s[mt][2 * np + 1], qk[mt], b[2], b[3]);
        }
      }
    }

    // Scale, mask, online softmax; P as the A fragments of the P V product.
    const int p0 = kt * kBN;
    const bool need_mask = p0 < keys.full_lo || p0 + kBN - 1 > keys.full_hi;
    uint32_t pa[MT][kBN / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float alpha[2];
      prefill::softmax_tile<kBN / 8, ALIBI>(s[mt], rw[mt], p0, need_mask, scale_log2, slope, alpha);
      scale_rows(o[mt], alpha);
      prefill::p_fragments<T>(s[mt], pa[mt]);
    }

    // O += P V: V^T fragments by ldmatrix.trans, each feeding MT mmas.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(
            b, vb + (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * kRow + dp * 16 + (lane / 16) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_m16n8k16<T>(o[mt][2 * dp], pa[mt][kk], b[0], b[1]);
          mma_m16n8k16<T>(o[mt][2 * dp + 1], pa[mt][kk], b[2], b[3]);
        }
      }
    }
    if constexpr (kIsFp8<C>) {
      if (kt < kt_end) {
        cp_async_wait<0>();  // this thread's copies of the next tile
        __syncthreads();     // every warp is done reading the stage
        widen_tile();
      }
    } else {
      __syncthreads();  // stage st is reloaded by the next iteration
    }
  }

  const size_t ld = size_t(heads) * D;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    prefill::store_rows<T>(o[mt], rw[mt], L.scale.v, out, ld, q0, (warp * MT + mt) * 16, rows,
                           h * D);
}

template <typename T, typename C, int D, int MT, bool QREG, bool ALIBI>
void launch_variant(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                    const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
                    const int32_t* cu_q, int num_seqs, int max_q_len, T* out, int heads,
                    float scale, const float* alibi_slopes, int window, const PagedKvLayout& L,
                    cudaStream_t stream) {
  constexpr int bytes = smem_bytes<C, D, MT>();
  auto* kernel = prefill_kernel<T, C, D, MT, QREG, ALIBI>;
  // Raised on every launch (cheap, per device, allowed during graph capture).
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  const dim3 grid((max_q_len + 64 * MT - 1) / (64 * MT), heads, num_seqs);
  kernel<<<grid, kThreads, bytes, stream>>>(q, q_stride, k_cache, v_cache, block_tables, token_seq,
                                            token_pos, cu_q, out, heads, scale * prefill::kLog2e,
                                            alibi_slopes, window, L);
}

template <typename T, typename C, int D, bool ALIBI>
void launch(const T* q, int q_stride, const C* k_cache, const C* v_cache,
            const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
            const int32_t* cu_q, int num_seqs, int max_q_len, T* out, int heads, float scale,
            const float* alibi_slopes, int window, const PagedKvLayout& L, PrefillKernel choice,
            cudaStream_t stream) {
  if constexpr (prefill::wgmma_head_dim(D)) {
    if (choice == PrefillKernel::kBest && current_gpu().hopper())
      return prefill::launch_wgmma<T, C, D, ALIBI>(q, q_stride, k_cache, v_cache, block_tables,
                                                token_seq, token_pos, cu_q, num_seqs, max_q_len,
                                                out, heads, scale * prefill::kLog2e, alibi_slopes,
                                                window, L, stream);
  }
  auto run = [&](auto mt) {
    constexpr int MT = decltype(mt)::value;
    launch_variant<T, C, D, MT, MT == 1 && !kIsFp8<C>, ALIBI>(
        q, q_stride, k_cache, v_cache, block_tables, token_seq, token_pos, cu_q, num_seqs,
        max_q_len, out, heads, scale, alibi_slopes, window, L, stream);
  };
  if constexpr (kIsFp8<C> || D > 128) {  // head_dim 256: 2 m-tiles would not fit the registers
    run(std::integral_constant<int, 1>{});
  } else {
    // 128-row tiles when they still give >= 2 CTAs per SM (H100, 4096-token prompt: 182 vs 155
    // TFLOP/s), 64-row tiles for short prompts (512 tokens: 35 vs 41 us).
    const long ctas_wide = long((max_q_len + 127) / 128) * heads * num_seqs;
    if (ctas_wide >= 2L * current_gpu().sms)
      run(std::integral_constant<int, 2>{});
    else
      run(std::integral_constant<int, 1>{});
  }
}

}  // namespace

template <typename T, typename C>
void paged_attention_prefill(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                             const int32_t* block_tables, const int32_t* token_seq,
                             const int32_t* token_pos, const int32_t* cu_q, int num_seqs,
                             int max_q_len, T* out, int heads, float scale,
                             const float* alibi_slopes, int window, const PagedKvLayout& layout,
                             cudaStream_t stream, PrefillKernel kernel) {
  if (num_seqs <= 0 || max_q_len <= 0 || heads <= 0) return;
  scale *= layout.scale.k;  // scores of the cached codes (kernels/attention.h)
  dispatch_head_dim(layout.head_dim, "paged_attention_prefill", [&](auto dim) {
    dispatch_alibi(alibi_slopes, [&](auto alibi) {
      launch<T, C, decltype(dim)::value, decltype(alibi)::value>(
          q, q_stride, k_cache, v_cache, block_tables, token_seq, token_pos, cu_q, num_seqs,
          max_q_len, out, heads, scale, alibi_slopes, window, layout, kernel, stream);
    });
  });
}

#define LMX_INSTANTIATE(T, C)                                                                      \
  template void paged_attention_prefill<T, C>(const T*, int, const C*, const C*, const int32_t*,   \
                                              const int32_t*, const int32_t*, const int32_t*, int, \
                                              int, T*, int, float, const float*, int,              \
                                              const PagedKvLayout&, cudaStream_t, PrefillKernel);
LMX_KV_CACHE_TYPES_16BIT(LMX_INSTANTIATE)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
