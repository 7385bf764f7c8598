// Skinny linear for decode: y[M, N] = x[M, K] · w[N, K]^T with M <= 8 rows, T = __half or
// __nv_bfloat16, fp32 accumulation, output T or fp32. Requires K % 8 == 0 and 16-byte aligned
// x and w (every row then starts on 16 bytes); any N, any M in 1..8.
//
// Decode is bound by reading w once (Llama-2-7B: 33-262 MB a call, x and y are < 0.3% of it), so
// the kernel is built to keep HBM saturated; arithmetic is nearly free:
//
// - Tensor cores do the math. A warp multiplies a 16-row tile of w by x^T with
//   mma.m16n8k16 (A = 16 weight rows x 16 k, B = 16 k x 8 rows of x, zero-padded past M, fp32
//   out), so M = 1..8 cost the same and no instruction converts a half. A dot product does not
//   care in which order k is summed, so each lane feeds the mma the 16 contiguous bytes it loaded
//   (8 k of one row) and x is read in the same permuted order: lane (g = lane / 4, t = lane % 4)
//   loads chunk 4s + t (8 k) of weight rows g and g + 8 and of x row g for k-step s (32 k).
//   Each mma starts from zero and is added to fp32 registers with ordinary (rounded) adds.
// - Many 16-byte loads in flight: a warp issues all 2 x kSteps weight loads of an iteration
//   (16 x 16 B a lane, 8 KB a warp) before its first mma, so a block of 8 warps requests 64 KB
//   at once (the registers would hold 2 such blocks an SM; one is launched, see the knobs, and
//   132 x 64 KB = 8.4 MB in flight, several times the ~3 MB that 3 TB/s x ~1 us of latency
//   needs); weights are read with
//   ld.global.nc.L1::no_allocate.L2::256B (streamed once: L1 keeps x, L2 fetches 256-byte
//   blocks); x is read through L2 (.cg: it is written by the kernel this one overlaps).
// - The 8 warps of a block split K of the same tile (warp w takes k-steps w, w + 8, ...) and sum
//   their 16 x 8 partial tiles in shared memory, so even N = 4096 (256 tiles) gives 2048 warps
//   of independent streams, with no second kernel.
// - The grid is sized to the GPU (SMs x blocks per SM, queried once) and the tiles are dealt
//   evenly: every block gets the same number of tiles, give or take one in a few blocks.
//
// Launchers allocate nothing and never synchronize (graph capture).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/paged_kv.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/rotary.cuh"
#include "kernels/gemm.h"

namespace lmx::kernels::cuda {
namespace {

// Tuning knobs, compile-time only (the defaults are the shipped configuration; the bench's
// header says how to build variants): warps a block, k-steps a warp iteration, and the resident
// blocks per SM that the register budget is sized for (65536 / (32 x warps x blocks) registers a
// thread: 8 warps x 2 blocks = 128, which 8 steps need). Measured in the Llama-2-7B fp16 decode
// step on an H100 (graphs, 2026-11-21): 8/8/2 5.34 ms at batch 1 and 6.55 at batch 8; 8/4/3
// 5.48 / 6.72; 4/8/4 5.52 / 7.06. The blocks launched per SM are a separate knob: one block of
// 8 warps per SM (half what the registers allow) measured faster in the whole step than two, at
// every batch size (H100, 2026-11-22, with the decode attention's late trigger, see pdl.cuh):
// batch 1 5.27-5.31 against 5.50-5.53 ms, batch 8 6.62-6.66 against 7.15-7.17.
#ifndef LMX_GEMV_WARPS
#define LMX_GEMV_WARPS 8
#endif
#ifndef LMX_GEMV_STEPS
#define LMX_GEMV_STEPS 8
#endif
#ifndef LMX_GEMV_MIN_BLOCKS
#define LMX_GEMV_MIN_BLOCKS 2
#endif
#ifndef LMX_GEMV_GRID_BLOCKS_PER_SM
#define LMX_GEMV_GRID_BLOCKS_PER_SM 1
#endif
#ifndef LMX_GEMV_PDL  // launch as a programmatic dependent (1) or plainly (0)
#define LMX_GEMV_PDL 1
#endif

constexpr int kTileRows = 16;           // weight rows per tile: the mma's M
constexpr int kWarps = LMX_GEMV_WARPS;  // warps a block, splitting K of one tile
constexpr int kThreads = kWarps * 32;
constexpr int kSteps = LMX_GEMV_STEPS;           // k-steps a warp iteration: 2 x 16 B loads each
constexpr int kMinBlocks = LMX_GEMV_MIN_BLOCKS;  // resident blocks per SM (register budget)
constexpr int kGridBlocksPerSm = LMX_GEMV_GRID_BLOCKS_PER_SM;  // blocks launched per SM (<= that)
static_assert(kWarps >= 1 && kThreads <= 1024 && kSteps >= 1 && kMinBlocks >= 1);
static_assert(kGridBlocksPerSm >= 1);

// Defines `uint4 NAME(const uint4* p, bool pred)`: the 16 bytes at p loaded with the PTX load
// LOAD, or zeros without touching memory when !pred.
#define LMX_PREDICATED_LOAD16(NAME, LOAD)                                          \
  __device__ __forceinline__ uint4 NAME(const uint4* p, bool pred) {               \
    uint4 v;                                                                       \
    asm volatile(                                                                  \
        "{\n"                                                                      \
        "  .reg .pred p;\n"                                                        \
        "  setp.ne.b32 p, %5, 0;\n"                                                \
        "  mov.b32 %0, 0;\n  mov.b32 %1, 0;\n  mov.b32 %2, 0;\n  mov.b32 %3, 0;\n" \
        "  @p " LOAD " {%0, %1, %2, %3}, [%4];\n"                                   \
        "}\n"                                                                      \
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                               \
        : "l"(p), "r"(int(pred)));                                                 \
    return v;                                                                      \
  }

// Weights: streamed once through the read-only path, no L1 allocation, 256-byte L2 fetches.
LMX_PREDICATED_LOAD16(load_weights, "ld.global.nc.L1::no_allocate.L2::256B.v4.u32")
// x: cached in L2 only. Not the read-only (.nc) path: x is written by the kernel this one
// overlaps (programmatic dependent launch), so it is not read-only for this kernel's lifetime.
LMX_PREDICATED_LOAD16(load_x, "ld.global.cg.v4.u32")
#undef LMX_PREDICATED_LOAD16

// d = A · B for one m16n8k16 (fp32 out, zero accumulator in). Fragments (PTX ISA, per lane,
// g = lane / 4, t = lane % 4): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..],
// a3 = A[g+8][2t+8..]; b0 = B[2t..2t+1][g], b1 = B[2t+8..][g]; d = D[g][2t..2t+1],
// D[g+8][2t..2t+1].
template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                            uint32_t a3, uint32_t b0, uint32_t b1) {
  const float z = 0.0f;
  if constexpr (std::is_same_v<T, __half>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(z));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(z));
  }
}

// acc += the 16 x 8 product of one k-step (32 k): w_lo / w_hi are this lane's 8 k of weight rows
// g and g + 8, xv the same 8 k of x row g. The first 4 k of each go to one mma, the last 4 to
// the other (k-slots 2t, 2t+1 <- elements 0, 1; 2t+8, 2t+9 <- elements 2, 3).
template <typename T>
__device__ __forceinline__ void mma_step(float (&acc)[4], const uint4& w_lo, const uint4& w_hi,
                                         const uint4& xv) {
  float d0[4], d1[4];
  mma_16x8x16<T>(d0, w_lo.x, w_hi.x, w_lo.y, w_hi.y, xv.x, xv.y);
  mma_16x8x16<T>(d1, w_lo.z, w_hi.z, w_lo.w, w_hi.w, xv.z, xv.w);
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] += d0[i] + d1[i];
}

// Sum of squares of the 8 elements of x in one 16-byte chunk (fp32).
template <typename T>
__device__ __forceinline__ float sum_squares(const uint4& v) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  float s = 0.0f;
#pragma unroll
  for (uint32_t word : words) {
    float2 f;
    if constexpr (std::is_same_v<T, __half>)
      f = __half22float2(*reinterpret_cast<const __half2*>(&word));
    else
      f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&word));
    s += f.x * f.x + f.y * f.y;
  }
  return s;
}

// This warp's share of tile rows [n0, n0 + 16) over all of K: k-steps warp, warp + kWarps, ...
// w_lo / w_hi / xr point at the lane's first chunk (chunk 4 x warp + t) of weight rows g and
// g + 8 and of x row g; `left` is how many chunks of the row remain from the warp's first step
// (chunk 4 x warp): the same in every lane, so the loop, and with it the warp-wide mma, never
// diverges. Returns the lane's part of the 16 x 8 partial product (see mma_16x8x16's d).
//
// The kernel is launched as a programmatic dependent (kernels/cuda/pdl.cuh): with `first` set (the
// block's first tile) the first iteration's weight loads are issued before waiting for the kernel
// that writes x, so the weight stream starts during that kernel's tail. With kSumSquares, the first
// tile also adds the squares of the lane's x elements to `ss` (every element of x row g is loaded
// by exactly one lane of the block with that g).
template <typename T, bool kSumSquares>
__device__ __forceinline__ void tile_partial(float (&acc)[4], float& ss, const uint4* w_lo,
                                             const uint4* w_hi, const uint4* xr, bool has_x,
                                             int t, int left, bool first) {
  constexpr int kStride = kWarps * 4;  // chunks from one of the warp's steps to its next
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = 0.0f;
  bool wait = first;
  // Pointers advance a whole iteration at a time, so every load is [pointer + constant].
  for (; left > 0; left -= kStride * kSteps, w_lo += kStride * kSteps, w_hi += kStride * kSteps,
                   xr += kStride * kSteps) {
    uint4 lo[kSteps], hi[kSteps], xv[kSteps];
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {  // every weight load first: 2 x kSteps in flight a lane
      lo[u] = load_weights(w_lo + u * kStride, u * kStride + t < left);
      hi[u] = load_weights(w_hi + u * kStride, u * kStride + t < left);
    }
    if (wait) {  // weights never change within a step: only x had to wait
      pdl::wait_for_primary();
      wait = false;
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u)
      xv[u] = load_x(xr + u * kStride, has_x && u * kStride + t < left);
#pragma unroll
    for (int u = 0; u < kSteps; ++u) mma_step<T>(acc, lo[u], hi[u], xv[u]);
    if constexpr (kSumSquares) {
      if (first)
#pragma unroll
        for (int u = 0; u < kSteps; ++u) ss += sum_squares<T>(xv[u]);
    }
  }
  if (wait) pdl::wait_for_primary();  // this warp had no k-steps
}

// ---- Epilogues: which 16 weight rows a tile multiplies, and where their results go. ----------
// rows(tile, g): the weight rows of tile rows g and g + 8 (clamped into w: rows past the end are
// read, their results dropped). store(m, info, pre, tile, g, lo, hi): the fp32 results of those
// two rows for x row m, with info = row_info(epilogue, m), looked up once a block before the tiles
// (NoRowInfo unless the epilogue needs something per token), and pre = prefetch(epilogue, m, info,
// tile, g): what the store needs besides the product (NoPrefetch unless something), loaded or
// computed before the tile's weight stream so that its latency hides under the stream instead of
// adding to the block's tail. Each output element is stored by one lane of one block.
struct NoRowInfo {};
template <typename Epilogue>
__device__ NoRowInfo row_info(const Epilogue&, int) {
  return {};
}
struct NoPrefetch {};
template <typename Epilogue, typename Info>
__device__ NoPrefetch prefetch(const Epilogue&, int, const Info&, int, int) {
  return {};
}

// y[m, n] = result: tile rows are weight rows tile x 16 + 0..15.
template <typename Out>
struct StoreRows {
  Out* y;
  int N;
  __host__ __device__ int tiles() const { return (N + kTileRows - 1) / kTileRows; }
  __device__ int2 rows(int tile, int g) const {
    const int n = tile * kTileRows + g;
    return make_int2(min(n, N - 1), min(n + 8, N - 1));
  }
  __device__ void store(int m, NoRowInfo, NoPrefetch, int tile, int g, float lo, float hi) const {
    const int n = tile * kTileRows + g;
    if (n < N) y[size_t(m) * N + n] = Out(lo);
    if (n + 8 < N) y[size_t(m) * N + n + 8] = Out(hi);
  }
};

// residual[m, n] += result + bias[n], in place (one rounding to T). The residual and bias of a
// tile's outputs are loaded before its weight stream: for a block's first tile that is before
// waiting for the previous kernel, so the residual must not be written by that kernel (see
// skinny_linear_add in kernels/gemm.h).
template <typename T>
struct AddToResidual {
  T* residual;
  const T* bias;  // [N] or null
  int N;
  __host__ __device__ int tiles() const { return (N + kTileRows - 1) / kTileRows; }
  __device__ int2 rows(int tile, int g) const { return StoreRows<T>{nullptr, N}.rows(tile, g); }
  // residual + bias of row m at tile rows g, g + 8 (zeros past N).
  __device__ float addend(int m, int n) const {
    if (n >= N) return 0.0f;
    // Through L2 (.cg): the residual was written by an earlier kernel of the step.
    const float r = float(__ldcg(residual + size_t(m) * N + n));
    return bias ? r + float(bias[n]) : r;
  }
  __device__ float2 prefetch(int m, int tile, int g) const {
    const int n = tile * kTileRows + g;
    return make_float2(addend(m, n), addend(m, n + 8));
  }
  __device__ void store(int m, NoRowInfo, float2 pre, int tile, int g, float lo, float hi) const {
    const int n = tile * kTileRows + g;
    if (n < N) residual[size_t(m) * N + n] = T(pre.x + lo);
    if (n + 8 < N) residual[size_t(m) * N + n + 8] = T(pre.y + hi);
  }
};
template <typename T>
__device__ float2 prefetch(const AddToResidual<T>& e, int m, NoRowInfo, int tile, int g) {
  return e.prefetch(m, tile, g);
}

// y[m, j] = act(gate_j + bias[j]) * (up_j + bias[inter + j]) with w = [gate rows; up rows]
// ([2 x inter, K]): tile rows 0..7 are gate rows tile x 8 + 0..7, rows 8..15 the up rows of the
// same j, so one lane holds both halves of an output.
template <typename T, ActivationKind A>
struct GatedActivation {
  T* y;
  const T* bias;  // [2 x inter] (gate | up) or null
  int inter;
  __host__ __device__ int tiles() const { return (inter + 7) / 8; }
  __device__ int2 rows(int tile, int g) const {
    const int j = min(tile * 8 + g, inter - 1);
    return make_int2(j, inter + j);
  }
  __device__ void store(int m, NoRowInfo, NoPrefetch, int tile, int g, float gate,
                        float up) const {
    const int j = tile * 8 + g;
    if (j >= inter) return;
    if (bias) gate += float(bias[j]), up += float(bias[inter + j]);
    y[size_t(m) * inter + j] = T(detail::activate<A>(gate) * up);
  }
};

// The decode qkv projection with rope_write_kv (kernels/rope_kv.h) as its epilogue: bias, rotary
// on q and k, rotated q written back to qkv (attention reads it there), k and v written to the
// token's cache slot only. w's rows are [q heads | k heads | v] x head_dim. A q or k head is
// half / 8 pair tiles (tile rows 0..7 = dims i..i+7, rows 8..15 = dims i+half.., so one lane
// holds both members of a rotary pair) then (head_dim - rotary_dim) / 16 plain tiles; v is plain
// tiles. Needs rotary_dim % 16 == 0 and head_dim % 16 == 0 (rope_epilogue_supported).
template <typename T>
struct RopeKvWrite {
  struct Row {
    float pos;    // the rotary position
    size_t slot;  // kv_slot of the token; only meaningful when `cache`
    bool cache;   // token_seq >= 0: write K/V (graph padding rows have a null block instead)
  };
  T* qkv;
  int qkv_stride;
  const T* bias;  // [q_size + 2 kv_size] or null
  const int32_t* token_pos;
  const int32_t* token_seq;
  const int32_t* block_tables;
  const float* inv_freq;  // [rotary_dim / 2]
  int rotary_dim, heads;
  T* k_cache;
  T* v_cache;
  PagedKvLayout L;

  __host__ __device__ int pair_tiles() const { return rotary_dim / 16; }
  __host__ __device__ int head_tiles() const { return pair_tiles() + (L.head_dim - rotary_dim) / 16; }
  __host__ __device__ int qk_tiles() const { return (heads + L.kv_heads) * head_tiles(); }
  __host__ __device__ int tiles() const { return qk_tiles() + L.kv_heads * L.head_dim / 16; }
  __device__ Row row(int m) const {
    const int seq = token_seq[m], pos = token_pos[m];
    return {float(pos), seq >= 0 ? detail::kv_slot(block_tables, L, seq, pos) : 0, seq >= 0};
  }
  // Columns of tile rows g and g + 8; `pair` = rotary index i of a pair tile, else -1.
  __device__ int2 columns(int tile, int g, int& pair) const {
    pair = -1;
    if (tile >= qk_tiles()) {  // v
      const int c = (heads + L.kv_heads) * L.head_dim + (tile - qk_tiles()) * kTileRows + g;
      return make_int2(c, c + 8);
    }
    const int h = tile / head_tiles(), r = tile % head_tiles(), base = h * L.head_dim;
    if (r < pair_tiles()) {
      pair = r * 8 + g;
      return make_int2(base + pair, base + pair + rotary_dim / 2);
    }
    const int c = base + rotary_dim + (r - pair_tiles()) * kTileRows + g;
    return make_int2(c, c + 8);
  }
  __device__ int2 rows(int tile, int g) const {
    int pair;
    return columns(tile, g, pair);
  }
  // (sin, cos) of a pair tile's rotary angle for token m: computed before the weight stream.
  __device__ float2 prefetch(const Row& info, int tile, int g) const {
    int pair;
    columns(tile, g, pair);
    return pair >= 0 ? detail::rotary_sincos(info.pos, inv_freq[pair]) : make_float2(0.0f, 1.0f);
  }
  __device__ void put(int m, const Row& info, int c, float v) const {
    const int q_size = heads * L.head_dim, kv_size = L.kv_heads * L.head_dim;
    if (c < q_size)
      qkv[size_t(m) * qkv_stride + c] = T(v);
    else if (!info.cache)
      return;
    else if (c < q_size + kv_size)
      k_cache[info.slot + (c - q_size)] = T(v);
    else
      v_cache[info.slot + (c - q_size - kv_size)] = T(v);
  }
  __device__ void store(int m, const Row& info, float2 sincos, int tile, int g, float lo,
                        float hi) const {
    int pair;
    const int2 c = columns(tile, g, pair);
    if (bias) lo += float(bias[c.x]), hi += float(bias[c.y]);
    if (pair >= 0) {
      const float2 rotated = detail::rotate_pair(lo, hi, sincos);
      lo = rotated.x, hi = rotated.y;
    }
    put(m, info, c.x, lo);
    put(m, info, c.y, hi);
  }
};
template <typename T>
__device__ typename RopeKvWrite<T>::Row row_info(const RopeKvWrite<T>& e, int m) {
  return e.row(m);
}
template <typename T>
__device__ float2 prefetch(const RopeKvWrite<T>& e, int, const typename RopeKvWrite<T>::Row& info,
                           int tile, int g) {
  return e.prefetch(info, tile, g);
}

// Whether the kernel lets its dependent in once it has waited for its own primary
// (kernels/cuda/pdl.cuh). Only the qkv projection does: its dependent is the decode attention,
// whose blocks fit beside the GEMV's and gather the K/V of earlier positions while it streams
// (H100, Llama-2-7B fp16 step: batch 1 5.19-5.22 ms against 5.25-5.27, batch 8 6.45-6.48 against
// 6.54-6.59). Between projections it is slower (pdl.cuh).
template <typename Epilogue>
constexpr bool kLetsDependentsIn = false;
template <typename T>
constexpr bool kLetsDependentsIn<RopeKvWrite<T>> = true;

// One block: tiles blockIdx.x, blockIdx.x + gridDim.x, ... of 16 weight rows; its warps split K
// and warp 0 sums their partial tiles (double-buffered, so one barrier a tile) and hands them to
// the epilogue. kRmsInput: each x row enters scaled by 1 / sqrt(mean(x^2) + eps), applied to the
// results (the sums of squares are taken from the first tile's x loads).
template <typename T, typename Epilogue, bool kRmsInput>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    skinny_kernel(const T* __restrict__ x, const T* __restrict__ w, Epilogue epi, int M, int K,
                  float eps) {
  __shared__ float4 partial[2][kWarps][32];
  __shared__ float row_ss[kWarps][8];  // per warp, per x row: sum of squares (kRmsInput)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // mma fragment row group and k pair
  const int chunks = K / 8;              // 16-byte chunks a row
  const int first = 4 * warp + t;        // the lane's first chunk: step `warp`, chunk t of it
  const bool has_x = g < M;              // x rows past M are the mma's zero padding
  const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(has_x ? g : 0) * K) + first;
  const int tiles = epi.tiles();
  const int m0 = 2 * t, m1 = 2 * t + 1;  // the x rows of this lane's results
  float scale0 = 1.0f, scale1 = 1.0f;    // their RMS factors (warp 0, from the first tile)
  // Per-token epilogue data of this lane's rows (the step's metadata: written before the step, so
  // it may be read before waiting for the previous kernel).
  using Info = decltype(row_info(epi, 0));
  Info info0{}, info1{};
  if (warp == 0) {
    if (m0 < M) info0 = row_info(epi, m0);
    if (m1 < M) info1 = row_info(epi, m1);
  }
  using Pre = decltype(prefetch(epi, 0, info0, 0, 0));
  int buf = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, buf ^= 1) {
    Pre pre0{}, pre1{};  // before the first tile's wait: see the epilogue's prefetch
    if (warp == 0) {
      if (m0 < M) pre0 = prefetch(epi, m0, info0, tile, g);
      if (m1 < M) pre1 = prefetch(epi, m1, info1, tile, g);
    }
    const int2 rows = epi.rows(tile, g);
    const uint4* w_lo = reinterpret_cast<const uint4*>(w + size_t(rows.x) * K) + first;
    const uint4* w_hi = reinterpret_cast<const uint4*>(w + size_t(rows.y) * K) + first;
    const bool first_tile = tile == int(blockIdx.x);
    float acc[4], ss = 0.0f;
    // x is the previous kernel's output (and y may still be read by it): the first tile waits.
    tile_partial<T, kRmsInput>(acc, ss, w_lo, w_hi, xr, has_x, t, chunks - 4 * warp, first_tile);
    if constexpr (kLetsDependentsIn<Epilogue>)
      if (first_tile) pdl::allow_dependents();  // after the wait in tile_partial: pdl.cuh
    partial[buf][warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    if (kRmsInput && first_tile) {
      ss += __shfl_xor_sync(0xffffffffu, ss, 1);  // the 4 lanes (t) of row g
      ss += __shfl_xor_sync(0xffffffffu, ss, 2);
      if (t == 0) row_ss[warp][g] = ss;
    }
    __syncthreads();
    if (warp != 0) continue;
    if (kRmsInput && first_tile) {
      float ss0 = 0.0f, ss1 = 0.0f;
#pragma unroll
      for (int v = 0; v < kWarps; ++v) ss0 += row_ss[v][m0], ss1 += row_ss[v][m1];
      scale0 = rsqrtf(ss0 / float(K) + eps);
      scale1 = rsqrtf(ss1 / float(K) + eps);
    }
    float4 s = partial[buf][0][lane];
#pragma unroll
    for (int v = 1; v < kWarps; ++v) {
      const float4 p = partial[buf][v][lane];
      s.x += p.x, s.y += p.y, s.z += p.z, s.w += p.w;
    }
    // s = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1] with D[r][m] = y[m][tile row r].
    if (m0 < M) epi.store(m0, info0, pre0, tile, g, s.x * scale0, s.z * scale0);
    if (m1 < M) epi.store(m1, info1, pre1, tile, g, s.y * scale1, s.w * scale1);
  }
}

// Blocks for `tiles` tiles: at most SMs x kGridBlocksPerSm (and what the GPU holds at once of this
// kernel instance, queried on its first launch and cached: one device model per process), spread
// so every block gets the same number of tiles (ceil(tiles / grid), a few one less).
template <typename T, typename Epilogue, bool kRmsInput>
int grid_for(int tiles) {
  static const int resident = [] {
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, skinny_kernel<T, Epilogue, kRmsInput>, kThreads, 0) != cudaSuccess) {
      (void)cudaGetLastError();  // clear it: the launch reports a broken device
      sms = 132, per_sm = kMinBlocks;
    }
    return std::max(1, sms) * std::clamp(per_sm, 1, kGridBlocksPerSm);
  }();
  const int rounds = (tiles + resident - 1) / resident;
  return (tiles + rounds - 1) / rounds;
}

template <typename T, bool kRmsInput, typename Epilogue>
void launch(const T* x, const T* w, const Epilogue& epi, int M, int K, float eps,
            cudaStream_t stream) {
  const int tiles = epi.tiles();
  if (M <= 0 || tiles <= 0) return;
  auto* kernel = skinny_kernel<T, Epilogue, kRmsInput>;
  const int grid = grid_for<T, Epilogue, kRmsInput>(tiles);
  if (LMX_GEMV_PDL)
    pdl::launch_dependent(kernel, dim3(grid), dim3(kThreads), 0, stream, x, w, epi, M, K, eps);
  else
    kernel<<<grid, kThreads, 0, stream>>>(x, w, epi, M, K, eps);
}

}  // namespace

bool skinny_supported(int M, int K) { return M >= 1 && M <= kSkinnyMaxRows && K % 8 == 0; }

template <typename T>
void skinny_linear(const T* x, const T* w, T* y, int M, int N, int K, cudaStream_t stream) {
  launch<T, false>(x, w, StoreRows<T>{y, N}, M, K, 0.0f, stream);
}

template <typename T>
void skinny_linear_f32_out(const T* x, const T* w, float* y, int M, int N, int K,
                           cudaStream_t stream) {
  launch<T, false>(x, w, StoreRows<float>{y, N}, M, K, 0.0f, stream);
}

template <typename T>
void skinny_linear_rms(const T* x, float eps, const T* w, T* y, int M, int N, int K,
                       cudaStream_t stream) {
  launch<T, true>(x, w, StoreRows<T>{y, N}, M, K, eps, stream);
}

template <typename T>
void skinny_linear_rms_gated(ActivationKind kind, const T* x, float eps, const T* w,
                             const T* bias, T* y, int M, int inter, int K, cudaStream_t stream) {
  detail::with_activation(kind, [&](auto a) {
    launch<T, true>(x, w, GatedActivation<T, decltype(a)::value>{y, bias, inter}, M, K, eps,
                    stream);
  });
}

template <typename T>
void skinny_linear_add(const T* x, const T* w, const T* bias, T* residual, int M, int N, int K,
                       cudaStream_t stream) {
  launch<T, false>(x, w, AddToResidual<T>{residual, bias, N}, M, K, 0.0f, stream);
}

bool rope_epilogue_supported(int rotary_dim, int head_dim) {
  return rotary_dim > 0 && rotary_dim % 16 == 0 && head_dim % 16 == 0 && rotary_dim <= head_dim;
}

template <typename T>
void skinny_linear_rms_rope_kv(const T* x, float eps, const T* w, T* qkv, int qkv_stride,
                               const T* qkv_bias, const int32_t* token_pos, const float* inv_freq,
                               int rotary_dim, int heads, T* k_cache, T* v_cache,
                               const int32_t* block_tables, const int32_t* token_seq, int M, int K,
                               const PagedKvLayout& layout, cudaStream_t stream) {
  const RopeKvWrite<T> epi{qkv,      qkv_stride, qkv_bias, token_pos, token_seq, block_tables,
                           inv_freq, rotary_dim, heads,    k_cache,   v_cache,   layout};
  launch<T, true>(x, w, epi, M, K, eps, stream);
}

#define LMX_INSTANTIATE(T)                                                                        \
  template void skinny_linear_rms_rope_kv<T>(                                                     \
      const T*, float, const T*, T*, int, const T*, const int32_t*, const float*, int, int, T*,   \
      T*, const int32_t*, const int32_t*, int, int, const PagedKvLayout&, cudaStream_t);          \
  template void skinny_linear<T>(const T*, const T*, T*, int, int, int, cudaStream_t);            \
  template void skinny_linear_f32_out<T>(const T*, const T*, float*, int, int, int, cudaStream_t); \
  template void skinny_linear_rms<T>(const T*, float, const T*, T*, int, int, int, cudaStream_t); \
  template void skinny_linear_rms_gated<T>(ActivationKind, const T*, float, const T*, const T*,   \
                                           T*, int, int, int, cudaStream_t);                      \
  template void skinny_linear_add<T>(const T*, const T*, const T*, T*, int, int, int,             \
                                     cudaStream_t);
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
