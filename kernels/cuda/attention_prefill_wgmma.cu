// Prefill attention on Hopper's warpgroup tensor cores (wgmma, sm_90a) over a 16-bit or fp8
// paged cache, head_dim 64 and 128: the contract of kernels/attention.h's
// paged_attention_prefill, which dispatches here (attention_prefill.cu runs the other cases on
// mma.sync).
//
// Grid (q tiles, heads, chunks), 256 threads = 2 warpgroups x 64 query rows of a 128-row tile.
// Shared memory holds Q [128 rows x D] and stages of K and V [128 keys x D] in T, every 64 dims
// of a row one 128-byte row in the 128-byte swizzle wgmma reads (wgmma.cuh: chunk c of row r at
// chunk c ^ (r % 8)), 64-dim halves one after the other. Every thread copies with cp.async
// (16-byte pieces; keys outside the rows' [min lo, max pos] zero-filled): tile kt + 1 lands while
// tile kt is multiplied (Tile: three stages; fp8 caches: bytes staged, widened into two).
// Per key tile and warpgroup:
//   S = Q K^T: wgmma m64n128k16, Q (A) and K (B) from shared memory, both K-major (dims
//     contiguous);
//   the online softmax in registers (attention_prefill_tile.cuh: wgmma gives each warp 16 rows as
//     mma.sync does), masks only on tiles that cross a row's [lo, pos] edge;
//   O += P V: wgmma m64nDk16, P from registers (two n8 tiles of S are one k16 A fragment), V from
//     shared memory as an N-major B (its rows are keys, its dims contiguous: B [keys x dims]);
//     its wait is deferred to the next tile's S, so the two products run back to back.
// The warpgroups take turns (a named barrier): warpgroup 1's S after warpgroup 0's, so one
// computes its softmax while the other's products run (H200, 4096-token prompt: 259 TFLOP/s
// against 241 in lockstep).
// Q tiles run heaviest first (the last tile of a causal chunk has the most keys).
// 16-bit caches whose blocks are 8-128 keys and divide a tile run prefill_wgmma_tma_kernel: the
// same consumers, with K and V loaded by a third (producer) warpgroup through the TMA instead of
// every thread's cp.async (H200, 4096-token prompt, d128: 363 against 505 us). fp8 caches (which
// are widened on the way) and other block sizes run prefill_wgmma_kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/cuda/attention_prefill_tile.cuh"
#include "kernels/cuda/attention_prefill_wgmma.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace lmx::kernels::cuda::prefill {
namespace {

constexpr int kThreads = 256;  // two warpgroups
constexpr int kRowsQ = 128;    // query rows a tile: 64 a warpgroup
constexpr int kKeys = 128;     // keys a K / V tile

// Named barrier 1 between the warpgroups (0 is __syncthreads'): warpgroup 1 syncs, 0 arrives.
__device__ __forceinline__ void named_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// Shared memory of cache type C at head_dim D.
// 16-bit caches: three K / V stages. Tile kt + 1 lands in one while tile kt is multiplied from
// another, and the third may still be read by tile kt - 1's P V product (its wait is deferred
// past tile kt's S).
// fp8 caches: the next tile's bytes land in a staging area ([keys][D] bytes, K then V), and each
// thread widens the pieces it copied into a stage once the stage is free: two stages (a third
// would not fit beside the staging bytes at head_dim 128).
template <typename C, int D>
struct Tile {
  static constexpr int kStages = kIsFp8<C> ? 2 : 3;
  static constexpr int kQ = kRowsQ * D;                           // elements of Q
  static constexpr int kKv = kKeys * D;                           // elements of a K or V tile
  static constexpr int kStaging = kIsFp8<C> ? 2 * kKeys * D : 0;  // bytes
  static constexpr int kSmem = (kQ + 2 * kStages * kKv) * 2 + kStaging + 1024;  // + alignment
  static_assert(D == 64 || D == 128);
  static_assert(kSmem <= 227 * 1024);
};

// Element offset of (row, 16-byte chunk c of the row's D) in a swizzled [rows x D] tile.
__device__ __forceinline__ int swizzled(int rows, int row, int c) {
  return (c / 8) * rows * 64 + row * 64 + ((c % 8) ^ (row % 8)) * 8;
}

template <typename T, typename C, int D, bool ALIBI>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_wgmma_kernel(const T* __restrict__ q, int q_stride, const C* __restrict__ k_cache,
                         const C* __restrict__ v_cache, const int32_t* __restrict__ block_tables,
                         const int32_t* __restrict__ token_seq,
                         const int32_t* __restrict__ token_pos, const int32_t* __restrict__ cu_q,
                         T* __restrict__ out, int heads, float scale_log2,
                         const float* __restrict__ alibi_slopes, int window, PagedKvLayout L) {
#if LMX_WGMMA_AVAILABLE
  using Sizes = Tile<C, D>;
  constexpr int kStages = Sizes::kStages;
  constexpr int kPerRow = D / 8;                    // 16-byte chunks of a row of T
  constexpr int kRowsPerPass = kThreads / kPerRow;  // rows a pass of every thread copies
  constexpr int kPerRowC = D * sizeof(C) / 16;      // 16-byte chunks of a cache row
  constexpr int kKeysPerPass = kThreads / kPerRowC;
  extern __shared__ unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(tma::align_1024(smem_raw));       // [halves][128 rows][64]
  T* ks = qs + Sizes::kQ;                                        // [stages][halves][128 keys][64]
  T* vs = ks + kStages * Sizes::kKv;                             // [stages][halves][128 keys][64]
  C* k_bytes = reinterpret_cast<C*>(vs + kStages * Sizes::kKv);  // fp8: [128 keys][D]
  C* v_bytes = k_bytes + kKeys * D;                              // fp8: [128 keys][D]
  __shared__ int red[kThreads / 32][4];

  const QueryTile tile = query_tile<kRowsQ>(cu_q, token_seq, block_tables, heads, L);
  if (tile.rows == 0) return;
  const int h = blockIdx.y, q0 = tile.q0, rows = tile.rows, kvh = tile.kvh;
  const int32_t* const table = tile.table;
  const int tid = threadIdx.x, warp = tid / 32, wg = warp / 4;
  const float slope = ALIBI ? alibi_slopes[h] * kLog2e : 0.0f;  // ALiBi, log2 domain

  Rows rw;
  rw.init(token_pos, q0, rows, warp * 16, window);  // warp w: rows 16 w .. 16 w + 15
  const KeyRange keys = key_range<kThreads / 32>(token_pos, q0, rows, window, red);

  // This thread copies chunk `part` of rows first_row + kRowsPerPass i of a tile.
  const int part = tid % kPerRow, first_row = tid / kPerRow;
  for (int i = 0; i < kRowsQ / kRowsPerPass; ++i) {
    const int r = first_row + i * kRowsPerPass;
    const bool valid = r < rows;
    const T* src = valid ? q + size_t(q0 + r) * q_stride + size_t(h) * D + part * 8 : q;
    cp_async16(qs + swizzled(kRowsQ, r, part), src, valid);
  }
  // Tile kt's keys as this thread copies them: chunk part_c (16 bytes of the cache row) of keys
  // key_c + kKeysPerPass i, to stage st (16-bit) or to the staging bytes (fp8, no stage).
  const int part_c = tid % kPerRowC, key_c = tid / kPerRowC;
  auto load_tile = [&](int kt, int st) {
#pragma unroll
    for (int i = 0; i < kKeys / kKeysPerPass; ++i) {
      const int r = key_c + i * kKeysPerPass;
      const int p = kt * kKeys + r;
      const bool valid = p >= keys.kmin && p <= keys.kmax;
      constexpr int kElems = 16 / sizeof(C);  // elements a chunk
      size_t off = 0;
      if (valid) {
        const size_t slot = size_t(table[p / L.block_size]) * L.block_size + p % L.block_size;
        off = (slot * L.kv_heads + kvh) * D + part_c * kElems;
      }
      if constexpr (kIsFp8<C>) {
        cp_async16(k_bytes + r * D + part_c * kElems, k_cache + off, valid);
        cp_async16(v_bytes + r * D + part_c * kElems, v_cache + off, valid);
      } else {
        const int at = swizzled(kKeys, r, part_c);
        cp_async16(ks + st * Sizes::kKv + at, k_cache + off, valid);
        cp_async16(vs + st * Sizes::kKv + at, v_cache + off, valid);
      }
    }
  };
  // fp8: the staging bytes this thread copied (load_tile's chunks: 16 codes, two chunks of T)
  // widened into stage st.
  auto widen_tile = [&](int st) {
#pragma unroll
    for (int i = 0; i < kKeys / kKeysPerPass; ++i) {
      const int r = key_c + i * kKeysPerPass;
      const uint4 kb = *reinterpret_cast<const uint4*>(k_bytes + r * D + part_c * 16);
      const uint4 vb = *reinterpret_cast<const uint4*>(v_bytes + r * D + part_c * 16);
      T* kd = ks + st * Sizes::kKv;
      T* vd = vs + st * Sizes::kKv;
      const int lo = swizzled(kKeys, r, 2 * part_c), hi = swizzled(kKeys, r, 2 * part_c + 1);
      *reinterpret_cast<uint4*>(kd + lo) = widen_fp8x8<T>(make_uint2(kb.x, kb.y));
      *reinterpret_cast<uint4*>(kd + hi) = widen_fp8x8<T>(make_uint2(kb.z, kb.w));
      *reinterpret_cast<uint4*>(vd + lo) = widen_fp8x8<T>(make_uint2(vb.x, vb.y));
      *reinterpret_cast<uint4*>(vd + hi) = widen_fp8x8<T>(make_uint2(vb.z, vb.w));
    }
  };

  const int kt_begin = keys.kmin / kKeys, kt_end = keys.kmax / kKeys;
  load_tile(kt_begin, 0);  // the same commit group carries the Q tile
  cp_async_commit();

  // The warpgroup's 64 Q rows in each 64-dim half; + 2 to a descriptor moves it 16 dims.
  const uint64_t q_desc = wgmma::sw128_desc(qs + wg * 64 * 64);
  constexpr uint64_t kHalfQ = (kRowsQ * 64 * 2) >> 4, kHalfKv = (kKeys * 64 * 2) >> 4;
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  auto& o_flat = reinterpret_cast<float(&)[D / 2]>(o);

  for (int kt = kt_begin; kt <= kt_end; ++kt) {
    const int st = (kt - kt_begin) % kStages;
    cp_async_wait<0>();  // this thread's copies of tile kt (fp8: its bytes) and of Q
    if constexpr (kIsFp8<C>) {
      __syncthreads();  // every warpgroup is past tile kt - 1's S: tile kt - 2's stage is free
      widen_tile(st);
    }
    wgmma::fence_shared_for_async();  // this thread's writes visible to the tensor cores' reads
    __syncthreads();  // everyone's; the stage (or staging bytes) loaded next is no longer read
    if (kt < kt_end) {
      load_tile(kt + 1, (kt + 1 - kt_begin) % kStages);
      cp_async_commit();
    }

    // S = Q K^T [64 rows x 128 keys] per warpgroup. Warpgroup 1 issues its S once warpgroup 0's
    // is done: its S runs while warpgroup 0 computes the softmax, its softmax while warpgroup 0's
    // P V runs.
    float s[kKeys / 8][4];
#pragma unroll
    for (int i = 0; i < kKeys / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
    auto& s_flat = reinterpret_cast<float(&)[kKeys / 2]>(s);
    const uint64_t k_desc = wgmma::sw128_desc(ks + st * Sizes::kKv);
    if (wg == 1) named_sync(1, kThreads);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma::wgmma_k16<T, kKeys>(s_flat, q_desc + (kk / 4) * kHalfQ + (kk % 4) * 2,
                                 k_desc + (kk / 4) * kHalfKv + (kk % 4) * 2);
    wgmma::commit();
    wgmma::wait<0>();  // S, and the P V product of tile kt - 1
    wgmma::fence_registers(s_flat);
    wgmma::fence_registers(o_flat);
    if (wg == 0) named_arrive(1, kThreads);

    const int p0 = kt * kKeys;
    const bool need_mask = p0 < keys.full_lo || p0 + kKeys - 1 > keys.full_hi;
    float alpha[2];
    softmax_tile<kKeys / 8, ALIBI>(s, rw, p0, need_mask, scale_log2, slope, alpha);
    scale_rows(o, alpha);
    uint32_t pa[kKeys / 16][4];
    p_fragments<T>(s, pa);

    // O += P V [64 rows x D] per warpgroup, waited for with the next tile's S: + 128 to V's
    // descriptor moves it 16 keys.
    const uint64_t v_desc = wgmma::sw128_n_major_desc(vs + st * Sizes::kKv, kKeys * 64 * 2);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk)
      wgmma::wgmma_rs_k16<T, D, true>(o_flat, pa[kk], v_desc + kk * 128);
    wgmma::commit();
  }
  wgmma::wait<0>();
  wgmma::fence_registers(o_flat);

  store_rows<T>(o, rw, L.scale.v, out, size_t(heads) * D, q0, warp * 16, rows, h * D);
#else
  wgmma::unavailable(q, k_cache, v_cache);
#endif
}

// 16-bit caches with blocks of 8-128 keys: a producer warpgroup loads K and
// V through the TMA. Warps 0-7 are the two consumer warpgroups of prefill_wgmma_kernel; warps
// 8-11 copy the Q tile with cp.async (its completion arrives on `q_full`), and one of their
// threads then issues, for every 128-key tile, one TMA box a cache block and 64-dim half of K and
// of V (block_size rows x 128 bytes, landing 128-byte swizzled where the cp.async kernel puts
// those rows) against the stage's `full` barrier; it reuses a stage once both warpgroups have
// retired its P V (`empty`: one arrival a warpgroup). Blocks wholly outside the rows' keys
// [kmin, kmax] are not loaded; the edge tiles' V rows of such keys are zeroed by the consumers
// (their P is 0, and 0 x a stale NaN would not be). No __syncthreads in the loop.
// setmaxnreg: 40 registers a producer thread, 232 a consumer thread (64,512 of the 65,536).
constexpr int kTmaThreads = kThreads + 128;
constexpr int kTmaRows = 1 << 28;  // the cache maps' row (slot) count: past any real cache

// Completion of this thread's earlier cp.async copies arrives on `bar` (counted in its init).
__device__ __forceinline__ void cp_async_arrive_noinc(uint64_t* bar) {
  asm volatile(
      "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(tma::shared_address(bar))
      : "memory");
}

template <typename T, int D, bool ALIBI>
__global__ void __launch_bounds__(kTmaThreads, 1)
    prefill_wgmma_tma_kernel(const __grid_constant__ CUtensorMap k_map,
                             const __grid_constant__ CUtensorMap v_map, const T* __restrict__ q,
                             int q_stride, const int32_t* __restrict__ block_tables,
                             const int32_t* __restrict__ token_seq,
                             const int32_t* __restrict__ token_pos,
                             const int32_t* __restrict__ cu_q, T* __restrict__ out, int heads,
                             float scale_log2, const float* __restrict__ alibi_slopes, int window,
                             PagedKvLayout L) {
#if LMX_WGMMA_AVAILABLE
  using Sizes = Tile<T, D>;
  constexpr int kStages = Sizes::kStages;
  constexpr int kPerRow = D / 8;  // 16-byte chunks of a row
  extern __shared__ unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(tma::align_1024(smem_raw));  // [halves][128 rows][64]
  T* ks = qs + Sizes::kQ;                                   // [stages][halves][128 keys][64]
  T* vs = ks + kStages * Sizes::kKv;                        // [stages][halves][128 keys][64]
  __shared__ int red[kTmaThreads / 32][4];
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages], q_full;

  const QueryTile tile = query_tile<kRowsQ>(cu_q, token_seq, block_tables, heads, L);
  if (tile.rows == 0) return;
  const int h = blockIdx.y, q0 = tile.q0, rows = tile.rows, kvh = tile.kvh;
  const int tid = threadIdx.x, warp = tid / 32, wg = warp / 4;
  if (tid == 0) {
    for (int i = 0; i < kStages; ++i) {
      tma::barrier_init(&full[i], 1);   // the producer's arrival (+ the stage's bytes)
      tma::barrier_init(&empty[i], 2);  // both consumer warpgroups, done with the stage
    }
    tma::barrier_init(&q_full, 128);  // every producer thread's Q copies
    tma::fence_barrier_init();
  }
  const KeyRange keys = key_range<kTmaThreads / 32>(token_pos, q0, rows, window, red);
  const int kt_begin = keys.kmin / kKeys, kt_end = keys.kmax / kKeys;
  const int bs = L.block_size;

  if (wg == 2) {  // the producer warpgroup
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    const int pt = tid - kThreads;  // 0 .. 127
    const int part = pt % kPerRow;
    for (int r = pt / kPerRow; r < kRowsQ; r += 128 / kPerRow) {
      const bool valid = r < rows;
      const T* src = valid ? q + size_t(q0 + r) * q_stride + size_t(h) * D + part * 8 : q;
      cp_async16(qs + swizzled(kRowsQ, r, part), src, valid);
    }
    cp_async_arrive_noinc(&q_full);
    cp_async_wait<0>();  // no thread leaves with its copies in flight
    if (pt != 0) return;
    for (int kt = kt_begin; kt <= kt_end; ++kt) {
      const int i = kt - kt_begin, st = i % kStages;
      if (i >= kStages) tma::wait(&empty[st], (i / kStages - 1) & 1);
      const int p0 = kt * kKeys;
      const int b_first = max(p0, keys.kmin) / bs, b_last = min(p0 + kKeys - 1, keys.kmax) / bs;
      tma::arrive_expect_tx(&full[st], uint32_t(b_last - b_first + 1) * bs * 128 * (D / 64) * 2);
      for (int b = b_first; b <= b_last; ++b) {
        const int slot0 = tile.table[b] * bs, r = b * bs - p0;
#pragma unroll
        for (int half = 0; half < D / 64; ++half) {
          const int at = st * Sizes::kKv + half * kKeys * 64 + r * 64;
          const int col = (kvh * D + half * 64) * 2;  // bytes into the slot's row
          tma::load_2d(ks + at, &k_map, col, slot0, &full[st]);
          tma::load_2d(vs + at, &v_map, col, slot0, &full[st]);
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const float slope = ALIBI ? alibi_slopes[h] * kLog2e : 0.0f;  // ALiBi, log2 domain
  Rows rw;
  rw.init(token_pos, q0, rows, warp * 16, window);  // warp w: rows 16 w .. 16 w + 15
  const uint64_t q_desc = wgmma::sw128_desc(qs + wg * 64 * 64);
  constexpr uint64_t kHalfQ = (kRowsQ * 64 * 2) >> 4, kHalfKv = (kKeys * 64 * 2) >> 4;
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  auto& o_flat = reinterpret_cast<float(&)[D / 2]>(o);
  tma::wait(&q_full, 0);
  wgmma::fence_shared_for_async();  // Q's copies (generic proxy) before wgmma's reads

  for (int kt = kt_begin; kt <= kt_end; ++kt) {
    const int i = kt - kt_begin, st = i % kStages;
    const int p0 = kt * kKeys;
    tma::wait(&full[st], (i / kStages) & 1);
    if (p0 < keys.kmin || p0 + kKeys - 1 > keys.kmax) {  // an edge tile: V of its outside keys 0
      T* vd = vs + st * Sizes::kKv;
      for (int c = tid; c < kKeys * kPerRow; c += kThreads) {
        const int r = c / kPerRow, p = p0 + r;
        if (p < keys.kmin || p > keys.kmax)
          *reinterpret_cast<uint4*>(vd + swizzled(kKeys, r, c % kPerRow)) = make_uint4(0, 0, 0, 0);
      }
      wgmma::fence_shared_for_async();
      named_sync(2, kThreads);
    }

    float s[kKeys / 8][4];
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
    auto& s_flat = reinterpret_cast<float(&)[kKeys / 2]>(s);
    const uint64_t k_desc = wgmma::sw128_desc(ks + st * Sizes::kKv);
    if (wg == 1) named_sync(1, kThreads);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma::wgmma_k16<T, kKeys>(s_flat, q_desc + (kk / 4) * kHalfQ + (kk % 4) * 2,
                                 k_desc + (kk / 4) * kHalfKv + (kk % 4) * 2);
    wgmma::commit();
    wgmma::wait<0>();  // S, and the P V product of tile kt - 1
    wgmma::fence_registers(s_flat);
    wgmma::fence_registers(o_flat);
    if (wg == 0) named_arrive(1, kThreads);
    if (i > 0 && tid % 128 == 0) tma::arrive(&empty[(i - 1) % kStages]);  // tile kt - 1 read

    const bool need_mask = p0 < keys.full_lo || p0 + kKeys - 1 > keys.full_hi;
    float alpha[2];
    softmax_tile<kKeys / 8, ALIBI>(s, rw, p0, need_mask, scale_log2, slope, alpha);
    scale_rows(o, alpha);
    uint32_t pa[kKeys / 16][4];
    p_fragments<T>(s, pa);

    const uint64_t v_desc = wgmma::sw128_n_major_desc(vs + st * Sizes::kKv, kKeys * 64 * 2);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk)
      wgmma::wgmma_rs_k16<T, D, true>(o_flat, pa[kk], v_desc + kk * 128);
    wgmma::commit();
  }
  wgmma::wait<0>();
  wgmma::fence_registers(o_flat);
  store_rows<T>(o, rw, L.scale.v, out, size_t(heads) * D, q0, warp * 16, rows, h * D);
#else
  wgmma::unavailable(q, out);
#endif
}

}  // namespace

template <typename T, typename C, int D, bool ALIBI>
void launch_wgmma(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                  const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
                  const int32_t* cu_q, int num_seqs, int max_q_len, T* out, int heads,
                  float scale_log2, const float* alibi_slopes, int window, const PagedKvLayout& L,
                  cudaStream_t stream) {
  // 16-bit caches with blocks of 8 to 128 keys that divide a tile (each is one TMA box a half):
  // the producer-warpgroup kernel (H200, 4096-token prompt, d128: 363 against 505 us).
  if constexpr (std::is_same_v<C, T>) {
    if (L.block_size % 8 == 0 && kKeys % L.block_size == 0) {
      auto* kernel = prefill_wgmma_tma_kernel<T, D, ALIBI>;
      constexpr int smem = Tile<C, D>::kSmem;
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      const int row_bytes = L.kv_heads * D * int(sizeof(T));
      const CUtensorMap k_map = tma::byte_matrix_map(k_cache, kTmaRows, row_bytes, L.block_size);
      const CUtensorMap v_map = tma::byte_matrix_map(v_cache, kTmaRows, row_bytes, L.block_size);
      const dim3 grid((max_q_len + kRowsQ - 1) / kRowsQ, heads, num_seqs);
      kernel<<<grid, kTmaThreads, smem, stream>>>(k_map, v_map, q, q_stride, block_tables,
                                                  token_seq, token_pos, cu_q, out, heads,
                                                  scale_log2, alibi_slopes, window, L);
      return;
    }
  }
  auto* kernel = prefill_wgmma_kernel<T, C, D, ALIBI>;
  constexpr int smem = Tile<C, D>::kSmem;
  // Raised on every launch (cheap, per device, allowed during graph capture).
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const dim3 grid((max_q_len + kRowsQ - 1) / kRowsQ, heads, num_seqs);
  kernel<<<grid, kThreads, smem, stream>>>(q, q_stride, k_cache, v_cache, block_tables, token_seq,
                                           token_pos, cu_q, out, heads, scale_log2, alibi_slopes,
                                           window, L);
}

#define LMX_INSTANTIATE_ONE(T, C, D, ALIBI)                                                       \
  template void launch_wgmma<T, C, D, ALIBI>(const T*, int, const C*, const C*, const int32_t*,   \
                                             const int32_t*, const int32_t*, const int32_t*, int, \
                                             int, T*, int, float, const float*, int,              \
                                             const PagedKvLayout&, cudaStream_t);
#define LMX_INSTANTIATE(T, C)           \
  LMX_INSTANTIATE_ONE(T, C, 64, false)  \
  LMX_INSTANTIATE_ONE(T, C, 64, true)   \
  LMX_INSTANTIATE_ONE(T, C, 128, false) \
  LMX_INSTANTIATE_ONE(T, C, 128, true)
LMX_KV_CACHE_TYPES_16BIT(LMX_INSTANTIATE)
#undef LMX_INSTANTIATE
#undef LMX_INSTANTIATE_ONE

}  // namespace lmx::kernels::cuda::prefill
