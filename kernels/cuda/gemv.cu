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
// - The weight stream never drains: each lane copies its own 16-byte chunks of w (the ones its
//   mma fragments need) into its own slots of shared memory with cp.async, a ring of kStages
//   iterations of kSteps k-steps (no lane reads another's slots, so no barrier guards them). The
//   next iteration's copies are issued before this one is multiplied, and each k-step's x for
//   the next iteration is loaded into its registers as soon as this iteration's step has used
//   them, across tile boundaries too (the ring runs over the block's tiles as one sequence). With 8
//   x 2 (64 KB an SM in flight, 128 KB of ring) a Llama-2-7B decode step measured faster than the
//   earlier register-held loads, and faster than deeper rings (4 x 4, 4 x 6, 8 x 3: more bytes
//   queued in front of the loads on the step's critical path) or shorter iterations
//   (bench/RESULTS.md). Weights go through L2 with 256-byte fetches and skip L1 (.cg); x is read
//   through L2 (ld.global.cg: it is written by the kernel this one overlaps).
// - Programmatic dependent launch (kernels/cuda/pdl.cuh): the first iteration is issued before
//   waiting for the kernel that writes x (weights never change within a step), and once its first
//   tile is done the kernel lets its dependent in. A ring of 128 KB leaves no room for a second
//   GEMV block on an SM, so the next projection's blocks take each SM as this one's block leaves
//   it and start their weight stream there, filling this kernel's tail; the decode attention's
//   smaller blocks fit beside the qkv projection's and gather older K/V while it streams.
// - The 8 warps of a block split K of the same tile (warp w takes k-steps w, w + 8, ...) and sum
//   their 16 x 8 partial tiles in shared memory, so even N = 4096 (256 tiles) gives 2048 warps
//   of independent streams, with no second kernel.
// - The grid is sized to the GPU (SMs x blocks per SM, queried once) and the tiles are dealt
//   evenly: every block gets the same number of tiles, give or take one in a few blocks.
//
// - int8 weights (dynamic_int8, W8A16, one fp32 scale an output row): the same kernel with W =
//   int8_t. A 16-byte chunk then holds 16 k of a row (in kernels/int8_layout.h's order); the lane
//   converts it in registers to two 8-k chunks of T in column order (exact: |q| <= 127;
//   byte_weights.cuh) and feeds two mma steps with the two matching x chunks,
//   so the k order stays the same permutation on both operands. Half the bytes a k, so an
//   iteration has half the k-steps and the ring one more stage (the same 64 KB an SM in flight).
//   The row's scale multiplies the tile's fp32 sums before the epilogue.
// - E4M3 weights (option.quantize=fp8 at decode sizes: 16-bit activations, one fp32 scale an
//   output row): the same with W = KvFp8, each 16-byte chunk widened in registers to two 8-k
//   chunks of T (exact: every E4M3 value is an fp16 and a bf16 value).
// - Grouped scales (dynamic_int8 with a group size, block-scaled fp8 checkpoints: one scale a row
//   per group of k, a multiple of 64): a k-step's 64 k lie in one group, so its mma products of
//   the lane's two rows are multiplied by their groups' scales before they join the sums. The
//   scales are copied with the weights (4-byte cp.async into a ring of their own, each k-step's
//   pair by one lane of the 4 that share it), so no load waits in the loop.
//
// Launchers allocate nothing and never synchronize (graph capture).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/byte_weights.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/paged_kv.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/rotary.cuh"
#include "kernels/gpu_properties.h"
#include "kernels/gemm.h"

namespace lmx::kernels::cuda {
namespace {

// Tuning knobs, compile-time only (the defaults are the shipped configuration; the bench's
// header says how to build variants): warps a block, k-steps an iteration (2 x 16-byte copies a
// lane each), iterations in the ring, resident blocks per SM the registers are sized for (one:
// the ring allows no more), and blocks launched per SM.
#ifndef LMX_GEMV_WARPS
#define LMX_GEMV_WARPS 8
#endif
#ifndef LMX_GEMV_STEPS
#define LMX_GEMV_STEPS 8
#endif
#ifndef LMX_GEMV_STAGES
#define LMX_GEMV_STAGES 2
#endif
#ifndef LMX_GEMV_MIN_BLOCKS
#define LMX_GEMV_MIN_BLOCKS 1
#endif
#ifndef LMX_GEMV_GRID_BLOCKS_PER_SM
#define LMX_GEMV_GRID_BLOCKS_PER_SM 1
#endif
#ifndef LMX_GEMV_BYTE_STEPS  // one-byte weights: k-steps an iteration (half T's: as many bytes)
#define LMX_GEMV_BYTE_STEPS ((LMX_GEMV_STEPS + 1) / 2)
#endif
#ifndef LMX_GEMV_BYTE_STAGES  // one-byte weights: iterations in the ring (one more than T's)
#define LMX_GEMV_BYTE_STAGES (LMX_GEMV_STAGES + 1)
#endif
#ifndef LMX_GEMV_PDL  // launch as a programmatic dependent (1) or plainly (0)
#define LMX_GEMV_PDL 1
#endif

constexpr int kTileRows = 16;           // weight rows per tile: the mma's M
constexpr int kWarps = LMX_GEMV_WARPS;  // warps a block, splitting K of one tile
constexpr int kThreads = kWarps * 32;
constexpr int kStride = kWarps * 4;              // chunks from one of a warp's k-steps to its next
constexpr int kMinBlocks = LMX_GEMV_MIN_BLOCKS;  // resident blocks per SM (register budget)
constexpr int kGridBlocksPerSm = LMX_GEMV_GRID_BLOCKS_PER_SM;  // blocks launched per SM (<= that)
static_assert(kWarps >= 1 && kThreads <= 1024 && kMinBlocks >= 1 && kGridBlocksPerSm >= 1);

// The weight stream's shape for weight element W: T (8 k a 16-byte chunk), or int8_t / KvFp8
// (one byte a weight with a scale a row: 16 k).
template <typename W>
struct Stream {
  static constexpr bool kBytes = sizeof(W) == 1;
  static constexpr int kXChunks = kBytes ? 2 : 1;  // 16-byte chunks of x (8 k) a weight chunk spans
  // k-steps an iteration (2 x 16 B copies a lane each) and iterations in a lane's ring (kStages -
  // 1 in flight): bytes halve the steps and add a stage, so as many bytes stay in flight. (As
  // many steps and stages as T streams a lone projection ~5% faster, but takes every register
  // of the SM; whole decode steps measured no faster for int8 and slower for fp8: RESULTS.md.)
  static constexpr int kSteps = kBytes ? LMX_GEMV_BYTE_STEPS : LMX_GEMV_STEPS;
  static constexpr int kStages = kBytes ? LMX_GEMV_BYTE_STAGES : LMX_GEMV_STAGES;
  static constexpr int kIterChunks = kStride * kSteps;  // weight chunks a warp covers an iteration
  // The ring: [kStages][kSteps][lo, hi][kThreads] 16-byte slots (consecutive lanes, consecutive
  // slots: conflict-free). Dynamic shared memory (more than the 48 KB a static array may have).
  static constexpr int kStageSlots = kSteps * 2 * kThreads;
  static constexpr int kRingBytes = kStages * kStageSlots * 16;
  // Grouped scales (one a row per `group` k, group % 64 == 0): each k-step's two scales (rows g
  // and g + 8) of a quad (the 4 lanes of one g), in a ring of their own beside the weights'
  // ([kStages][quad][kSteps] float2), copied with the same commit groups, each k-step's by one
  // lane of the quad.
  static constexpr int kScaleStageSlots = kThreads / 4 * kSteps;  // float2 slots
  static constexpr int kScaleRingBytes = kStages * kScaleStageSlots * 8;
  static_assert(kSteps >= 1 && kStages >= 2);
  static_assert(kRingBytes + kScaleRingBytes <= 200 * 1024,
                "the rings and the block's static shared memory fit an SM");
};

// Dynamic shared memory of a block: the weight ring, and the scale ring for grouped scales.
template <typename W, bool kGrouped>
constexpr int ring_bytes() {
  return Stream<W>::kRingBytes + (kGrouped ? Stream<W>::kScaleRingBytes : 0);
}

// x: 16 bytes through L2 only, or zeros without touching memory when !pred. Not the read-only
// (.nc) path: x is written by the kernel this one overlaps (programmatic dependent launch), so it
// is not read-only for this kernel's lifetime.
__device__ __forceinline__ uint4 load_x(const uint4* p, bool pred) {
  uint4 v;
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  setp.ne.b32 p, %5, 0;\n"
      "  mov.b32 %0, 0;\n  mov.b32 %1, 0;\n  mov.b32 %2, 0;\n  mov.b32 %3, 0;\n"
      "  @p ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];\n"
      "}\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "r"(int(pred)));
  return v;
}

// acc += the 16 x 8 product of one k-step (32 k): w_lo / w_hi are this lane's 8 k of weight rows
// g and g + 8 (A rows g, g + 8), xv the same 8 k of x row g (B column g). The first 4 k of each
// go to one mma, the last 4 to the other (k-slots 2t, 2t+1 <- elements 0, 1; 2t+8, 2t+9 <-
// elements 2, 3). Each mma starts from zero (independent of the last), then adds to acc.
template <typename T>
__device__ __forceinline__ void mma_step(float (&acc)[4], const uint4& w_lo, const uint4& w_hi,
                                         const uint4& xv) {
  float d0[4] = {}, d1[4] = {};
  const uint32_t a0[4] = {w_lo.x, w_hi.x, w_lo.y, w_hi.y}, a1[4] = {w_lo.z, w_hi.z, w_lo.w, w_hi.w};
  mma_m16n8k16<T>(d0, a0, xv.x, xv.y);
  mma_m16n8k16<T>(d1, a1, xv.z, xv.w);
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] += d0[i] + d1[i];
}

// acc += one k-step of weight element W: the lane's chunks of weight rows g and g + 8 against
// its x chunks of row g (one for T, two for one-byte weights: k 0..7 and 8..15 of the chunk).
template <typename T, typename W>
__device__ __forceinline__ void weight_step(float (&acc)[4], const uint4& w_lo, const uint4& w_hi,
                                            const uint4 (&xv)[Stream<W>::kXChunks]) {
  if constexpr (Stream<W>::kBytes) {
    uint4 lo0, lo1, hi0, hi1;
    widen_bytes16<T, W>(w_lo, lo0, lo1);
    widen_bytes16<T, W>(w_hi, hi0, hi1);
    mma_step<T>(acc, lo0, hi0, xv[0]);
    mma_step<T>(acc, lo1, hi1, xv[1]);
  } else {
    mma_step<T>(acc, w_lo, w_hi, xv[0]);
  }
}

// (sum, sum of squares) of the 8 elements of x in one 16-byte chunk, added to sums (fp32).
template <typename T>
__device__ __forceinline__ void add_sums(const uint4& v, float2& sums) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (uint32_t word : words) {
    float2 f;
    if constexpr (std::is_same_v<T, __half>)
      f = __half22float2(*reinterpret_cast<const __half2*>(&word));
    else
      f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&word));
    sums.x += f.x + f.y;
    sums.y += f.x * f.x + f.y * f.y;
  }
}

// ---- Epilogues: which 16 weight rows a tile multiplies, and where their results go. ----------
// rows(tile, g): the weight rows of tile rows g and g + 8 (clamped into w: rows past the end are
// read, their results dropped). store(m, info, pre, tile, g, lo, hi): the fp32 results of those
// two rows for x row m, with info = row_info(m), looked up once a block before the tiles (the
// step's metadata of token m, if the epilogue needs any), and pre = prefetch(m, info, tile, g):
// what the store needs besides the product, loaded or computed at the top of the tile so that its
// latency hides under the tile's weight stream instead of adding to the block's tail (for the
// block's first tile: before waiting for the previous kernel). Each output element is stored by
// one lane of one block. Epilogues that need neither derive from NoExtras.
struct NoRowInfo {};
struct NoPrefetch {};
struct NoExtras {
  __device__ NoRowInfo row_info(int) const { return {}; }
  __device__ NoPrefetch prefetch(int, NoRowInfo, int, int) const { return {}; }
};

// y[m, n] = result: tile rows are weight rows tile x 16 + 0..15.
template <typename Out>
struct StoreRows : NoExtras {
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
struct AddToResidual : NoExtras {
  T* residual;
  const T* bias;  // [N] or null
  int N;
  __host__ __device__ int tiles() const { return (N + kTileRows - 1) / kTileRows; }
  __device__ int2 rows(int tile, int g) const { return StoreRows<T>{{}, nullptr, N}.rows(tile, g); }
  // residual + bias of row m at tile rows g, g + 8 (zeros past N).
  __device__ float addend(int m, int n) const {
    if (n >= N) return 0.0f;
    // Through L2 (.cg): the residual was written by an earlier kernel of the step.
    const float r = float(__ldcg(residual + size_t(m) * N + n));
    return bias ? r + float(bias[n]) : r;
  }
  __device__ float2 prefetch(int m, NoRowInfo, int tile, int g) const {
    const int n = tile * kTileRows + g;
    return make_float2(addend(m, n), addend(m, n + 8));
  }
  __device__ void store(int m, NoRowInfo, float2 pre, int tile, int g, float lo, float hi) const {
    const int n = tile * kTileRows + g;
    if (n < N) residual[size_t(m) * N + n] = T(pre.x + lo);
    if (n + 8 < N) residual[size_t(m) * N + n + 8] = T(pre.y + hi);
  }
};

// y[m, j] = act(gate_j + bias[j]) * (up_j + bias[inter + j]) with w = [gate rows; up rows]
// ([2 x inter, K]): tile rows 0..7 are gate rows tile x 8 + 0..7, rows 8..15 the up rows of the
// same j, so one lane holds both halves of an output.
template <typename T, ActivationKind A>
struct GatedActivation : NoExtras {
  T* y;
  const T* bias;  // [2 x inter] (gate | up) or null
  int inter;
  __host__ __device__ int tiles() const { return (inter + 7) / 8; }
  __device__ int2 rows(int tile, int g) const {
    const int j = min(tile * 8 + g, inter - 1);
    return make_int2(j, inter + j);
  }
  __device__ void store(int m, NoRowInfo, NoPrefetch, int tile, int g, float gate, float up) const {
    const int j = tile * 8 + g;
    if (j >= inter) return;
    if (bias) gate += float(bias[j]), up += float(bias[inter + j]);
    y[size_t(m) * inter + j] = T(detail::activate<A>(gate) * up);
  }
};

// y[m, n] = act(result + bias[n]): tile rows are weight rows tile x 16 + 0..15.
template <typename T, ActivationKind A>
struct BiasActivation : NoExtras {
  T* y;
  const T* bias;  // [N] or null
  int N;
  __host__ __device__ int tiles() const { return (N + kTileRows - 1) / kTileRows; }
  __device__ int2 rows(int tile, int g) const { return StoreRows<T>{{}, nullptr, N}.rows(tile, g); }
  __device__ void store(int m, NoRowInfo, NoPrefetch, int tile, int g, float lo, float hi) const {
    const int n = tile * kTileRows + g;
    if (n < N) y[size_t(m) * N + n] = T(detail::activate<A>(bias ? lo + float(bias[n]) : lo));
    if (n + 8 < N)
      y[size_t(m) * N + n + 8] = T(detail::activate<A>(bias ? hi + float(bias[n + 8]) : hi));
  }
};

// The decode qkv projection with rope_write_kv (kernels/rope_kv.h) as its epilogue: bias, rotary
// on q and k, rotated q written back to qkv (attention reads it there), k and v written to the
// token's cache slot only. w's rows are [q heads | k heads | v] x head_dim. A q or k head is
// half / 8 pair tiles (tile rows 0..7 = dims i..i+7, rows 8..15 = dims i+half.., so one lane
// holds both members of a rotary pair) then (head_dim - rotary_dim) / 16 plain tiles; v is plain
// tiles. Needs rotary_dim % 16 == 0 and head_dim % 16 == 0 (rope_epilogue_supported). The
// cache (C: T or KvFp8) gets each value divided by L.scale.k / .v and rounded once from the fp32
// result (detail::to_cache).
template <typename T, typename C>
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
  C* k_cache;
  C* v_cache;
  PagedKvLayout L;

  __host__ __device__ int pair_tiles() const { return rotary_dim / 16; }
  __host__ __device__ int head_tiles() const {
    return pair_tiles() + (L.head_dim - rotary_dim) / 16;
  }
  __host__ __device__ int qk_tiles() const { return (heads + L.kv_heads) * head_tiles(); }
  __host__ __device__ int tiles() const { return qk_tiles() + L.kv_heads * L.head_dim / 16; }
  // Where a tile's two results go and how they rotate: computed before the weight stream.
  struct Target {
    int2 columns;   // of tile rows g and g + 8
    float2 sincos;  // of the rotary angle for a pair tile; (0, 1) otherwise
    bool pair;      // a rotary pair (rotated), else plain
  };
  __device__ Row row_info(int m) const {
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
  __device__ Target prefetch(int, const Row& info, int tile, int g) const {
    int pair;
    const int2 c = columns(tile, g, pair);
    if (pair < 0) return {c, make_float2(0.0f, 1.0f), false};
    return {c, detail::rotary_sincos(info.pos, inv_freq[pair]), true};
  }
  __device__ void put(int m, const Row& info, int c, float v) const {
    const int q_size = heads * L.head_dim, kv_size = L.kv_heads * L.head_dim;
    if (c < q_size)
      qkv[size_t(m) * qkv_stride + c] = T(v);
    else if (!info.cache)
      return;
    else if (c < q_size + kv_size)
      k_cache[info.slot + (c - q_size)] = detail::to_cache<C>(v, L.scale.k);
    else
      v_cache[info.slot + (c - q_size - kv_size)] = detail::to_cache<C>(v, L.scale.v);
  }
  __device__ void store(int m, const Row& info, const Target& to, int, int, float lo,
                        float hi) const {
    if (bias) lo += float(bias[to.columns.x]), hi += float(bias[to.columns.y]);
    if (to.pair) {
      const float2 rotated = detail::rotate_pair(lo, hi, to.sincos);
      lo = rotated.x, hi = rotated.y;
    }
    put(m, info, to.columns.x, lo);
    put(m, info, to.columns.y, hi);
  }
};

// The block's weight stream: the warp's iterations over the block's tiles (tiles blockIdx.x,
// blockIdx.x + gridDim.x, ...; `iters` iterations of kSteps k-steps each) as one sequence, issued
// kStages - 1 ahead of the one being multiplied, one cp.async commit group an iteration (empty past
// the end, so that waiting for all but the kStages - 2 newest groups always means "up to this
// iteration"). Lane (g, t) copies chunks 4 x (warp + s x kWarps) + t of weight rows g and g + 8
// for every k-step s: exactly the chunks its mma fragments need.
// kGrouped: the scales of each k-step's group (w_scale [N, K / group]) are copied beside the
// weights, into the scale ring after the weight ring (a k-step's 64 k lie in one group).
template <typename W, typename Epilogue, bool kGrouped>
struct WeightRing {
  using S = Stream<W>;
  static constexpr int kSteps = S::kSteps, kStages = S::kStages;
  static constexpr int kStageSlots = S::kStageSlots, kIterChunks = S::kIterChunks;
  const W* w;
  const float* w_scale;  // [N, K / group] (kGrouped)
  Epilogue epi;  // by value: a reference to the kernel parameter would copy it to the stack
  uint4* slots;  // this lane's slot of stage 0, step 0, lo; the others kThreads apart
  float2* quad_scales;  // the lane's quad's slots of stage 0 in the scale ring (kGrouped)
  int K, chunks, first, g, iters, total, group;
  int issued = 0, tile, it = 0;  // the next iteration to issue: its index, tile and iteration

  __device__ WeightRing(const W* w, const float* w_scale, int group, const Epilogue& epi,
                        uint4* ring, int K, int first, int g, int iters, int block_tiles)
      : w(w),
        w_scale(w_scale),
        epi(epi),
        slots(ring + threadIdx.x),
        quad_scales(reinterpret_cast<float2*>(ring + kStages * kStageSlots) +
                    threadIdx.x / 4 * kSteps),
        K(K),
        chunks(K * int(sizeof(W)) / 16),
        first(first),
        g(g),
        iters(iters),
        total(block_tiles * iters),
        group(group),
        tile(blockIdx.x) {}

  __device__ void issue() {
    if (issued < total) {
      const int2 rows = epi.rows(tile, g);
      const int c0 = first + it * kIterChunks;
      const uint4* lo = reinterpret_cast<const uint4*>(w + size_t(rows.x) * K) + c0;
      const uint4* hi = reinterpret_cast<const uint4*>(w + size_t(rows.y) * K) + c0;
      uint4* stage = slots + (issued % kStages) * kStageSlots;
#pragma unroll
      for (int u = 0; u < kSteps; ++u) {
        const bool in_row = c0 + u * kStride < chunks;
        cp_async16_stream(stage + (2 * u) * kThreads, lo + u * kStride, in_row);
        cp_async16_stream(stage + (2 * u + 1) * kThreads, hi + u * kStride, in_row);
      }
      if constexpr (kGrouped) {  // lane t of the quad: k-steps t, t + 4, ...
        const int groups = K / group, t = threadIdx.x % 4;
        float2* scales = quad_scales + (issued % kStages) * S::kScaleStageSlots;
#pragma unroll
        for (int v = 0; v < (kSteps + 3) / 4; ++v) {
          const int u = 4 * v + t;
          // The k-step's first chunk (one byte a k: chunk c holds k 16c .. 16c + 15); K % 64 == 0,
          // so its 4 chunks are all in the row or all past it.
          const int c = c0 - t + u * kStride;
          const bool in_row = c < chunks;
          const int j = in_row ? c * 16 / group : 0;
          if (u < kSteps) {
            cp_async4(&scales[u].x, w_scale + size_t(rows.x) * groups + j, in_row);
            cp_async4(&scales[u].y, w_scale + size_t(rows.y) * groups + j, in_row);
          }
        }
      }
      if (++it == iters) it = 0, tile += gridDim.x;
    }
    cp_async_commit();
    ++issued;
  }

  // Waits for iteration `n` (every earlier one has been waited for) and loads its weight chunks.
  __device__ void take(int n, uint4 (&lo)[kSteps], uint4 (&hi)[kSteps]) const {
    cp_async_wait<kStages - 2>();
    const uint4* stage = slots + (n % kStages) * kStageSlots;
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      lo[u] = stage[(2 * u) * kThreads];
      hi[u] = stage[(2 * u + 1) * kThreads];
    }
  }
  // Iteration n's group scales (kGrouped; after take(n)): (row g, row g + 8) a k-step. The
  // quad's other lanes copied some: the warp-wide barrier after each lane's wait makes them
  // visible, and keeps every lane's reads of a stage before any lane's next copy into it.
  __device__ void take_scales(int n, float2 (&scales)[kSteps]) const {
    __syncwarp();
    const float2* stage = quad_scales + (n % kStages) * S::kScaleStageSlots;
#pragma unroll
    for (int u = 0; u < kSteps; ++u) scales[u] = stage[u];
  }
};

// One block: tiles blockIdx.x, blockIdx.x + gridDim.x, ... of 16 weight rows; its warps split K
// (warp w takes k-steps w, w + kWarps, ...) and warp 0 sums their partial tiles (double-buffered,
// so one barrier a tile) and hands them to the epilogue. kNormInput: each x row enters normalized
// (InputNorm, kernels/gemm.h), applied to the results: the row's sums of x and x^2 are taken from
// the first tile's x loads (every element of x row g is loaded by exactly one lane of the block
// with that g), LayerNorm's mean x row_sums[n] is subtracted before the row's factor.
// W = int8_t or KvFp8: w_scale [N] multiplies each weight row's results (null for T weights);
// kGrouped: w_scale [N, K / group] (group % 64 == 0) multiplies each k-step's product of a row
// (its 64 k lie in one group) before it is added to the row's sums.
template <typename T, typename W, typename Epilogue, bool kNormInput, bool kGrouped>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    skinny_kernel(const T* x, const W* __restrict__ w, const float* __restrict__ w_scale,
                  int group, Epilogue epi, int M, int K, InputNorm norm) {
  using S = Stream<W>;
  constexpr int kSteps = S::kSteps, kIterChunks = S::kIterChunks, kX = S::kXChunks;
  extern __shared__ uint4 ring[];  // WeightRing's slots
  __shared__ float4 partial[2][kWarps][32];
  __shared__ float2 row_sums[kWarps][8];  // per warp, per x row: (sum, sum of squares)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;        // mma fragment row group and k pair
  const int chunks = K * int(sizeof(W)) / 16;  // 16-byte weight chunks a row
  const int first = 4 * warp + t;              // the lane's first chunk: step `warp`, chunk t of it
  const int tiles = epi.tiles();
  const int block_tiles = int(blockIdx.x) < tiles ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  // Iterations a tile takes this warp (the same in every lane, so the warp-wide mma never
  // diverges; 0 when K is too short to reach the warp's first step).
  const int reach = chunks - 4 * warp;
  const int iters = reach > 0 ? (reach + kIterChunks - 1) / kIterChunks : 0;
  const bool has_x = g < M;  // x rows past M are the mma's zero padding
  // x chunk j of weight chunk c is chunk c x kX + j of the row.
  const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(has_x ? g : 0) * K) + first * kX;
  const int m0 = 2 * t, m1 = 2 * t + 1;  // the x rows of this lane's results
  // Their norm factors r and LayerNorm means mu (warp 0, from the first tile); 1 and 0 without.
  float scale0 = 1.0f, scale1 = 1.0f, mean0 = 0.0f, mean1 = 0.0f;
  const bool centered = kNormInput && norm.row_sums != nullptr;  // LayerNorm

  // Before waiting for the previous kernel (kernels/cuda/pdl.cuh): the step's metadata of this
  // lane's rows, the first tile's epilogue inputs, and the first kStages - 1 weight iterations.
  using Info = decltype(epi.row_info(0));
  using Pre = decltype(epi.prefetch(0, Info{}, 0, 0));
  Info info0{}, info1{};
  Pre pre0{}, pre1{};
  auto prefetch = [&](int tile) {
    if (warp != 0) return;
    if (m0 < M) pre0 = epi.prefetch(m0, info0, tile, g);
    if (m1 < M) pre1 = epi.prefetch(m1, info1, tile, g);
  };
  if (warp == 0) {
    if (m0 < M) info0 = epi.row_info(m0);
    if (m1 < M) info1 = epi.row_info(m1);
  }
  prefetch(blockIdx.x);
  WeightRing<W, Epilogue, kGrouped> stream(w, w_scale, group, epi, ring, K, first, g, iters,
                                          block_tiles);
  for (int s = 0; s < S::kStages - 1; ++s) stream.issue();
  pdl::wait_for_primary();  // x is the previous kernel's output (and y may still be read by it)

  // x of k-step u of iteration i of a tile (the same for every tile). Each step's x is loaded
  // into the registers of the same step of the iteration before, as soon as that step has been
  // multiplied: nearly an iteration ahead, so that its latency (L2, under the weight stream's
  // load) overlaps the rest of that iteration, and one set of x registers, not two (the int8
  // qkv projection's block: 178 registers a thread instead of 226, which leaves room on its SM
  // for the blocks of the decode attention launched behind it; bench/RESULTS.md).
  auto load_x_step = [&](uint4(&xs)[kX], int i, int u) {
    const int c = i * kIterChunks + u * kStride;  // weight chunks past the lane's first
#pragma unroll
    for (int j = 0; j < kX; ++j) xs[j] = load_x(xr + c * kX + j, has_x && first + c < chunks);
  };
  uint4 xv[kSteps][kX];
#pragma unroll
  for (int u = 0; u < kSteps; ++u) load_x_step(xv[u], 0, u);
  int n = 0;  // the block's iteration being multiplied
  int buf = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, buf ^= 1) {
    const bool first_tile = tile == int(blockIdx.x);
    if (!first_tile) prefetch(tile);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float2 sums = make_float2(0.0f, 0.0f);  // of this lane's x (kNormInput, first tile)
    // The tile's two weight rows' scales (one-byte weights) and LayerNorm row sums, loaded under
    // the weight stream.
    float2 row_scale = make_float2(1.0f, 1.0f), row_sum = make_float2(0.0f, 0.0f);
    if ((S::kBytes || centered) && warp == 0) {
      const int2 r = epi.rows(tile, g);
      if (S::kBytes && !kGrouped) row_scale = make_float2(__ldg(w_scale + r.x), __ldg(w_scale + r.y));
      if (centered) row_sum = make_float2(__ldg(norm.row_sums + r.x), __ldg(norm.row_sums + r.y));
    }
    for (int i = 0; i < iters; ++i, ++n) {
      uint4 lo[kSteps], hi[kSteps];
      float2 group_scale[kSteps];
      stream.take(n, lo, hi);
      if constexpr (kGrouped) stream.take_scales(n, group_scale);
      stream.issue();                              // into the slots taken one iteration ago
      const int next = i + 1 < iters ? i + 1 : 0;  // the next tile's first, past the last: unused
#pragma unroll
      for (int u = 0; u < kSteps; ++u) {
        if constexpr (kGrouped) {
          float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]
          weight_step<T, W>(d, lo[u], hi[u], xv[u]);
          acc[0] += group_scale[u].x * d[0], acc[1] += group_scale[u].x * d[1];
          acc[2] += group_scale[u].y * d[2], acc[3] += group_scale[u].y * d[3];
        } else {
          weight_step<T, W>(acc, lo[u], hi[u], xv[u]);
        }
        if (kNormInput && first_tile)
#pragma unroll
          for (int j = 0; j < kX; ++j) add_sums<T>(xv[u][j], sums);
        load_x_step(xv[u], next, u);
      }
    }
    if (first_tile) pdl::allow_dependents();  // after the wait: pdl.cuh
    partial[buf][warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    if (kNormInput && first_tile) {
#pragma unroll
      for (int o = 1; o <= 2; o <<= 1) {  // the 4 lanes (t) of row g
        sums.x += __shfl_xor_sync(0xffffffffu, sums.x, o);
        sums.y += __shfl_xor_sync(0xffffffffu, sums.y, o);
      }
      if (t == 0) row_sums[warp][g] = sums;
    }
    __syncthreads();
    if (warp != 0) continue;
    if (kNormInput && first_tile) {
      // r = 1 / sqrt(mean(x^2) + eps) (RMSNorm) or 1 / sqrt(mean(x^2) - mu^2 + eps) (LayerNorm,
      // the biased variance; clamped at 0 against rounding).
      auto factors = [&](int m, float& scale, float& mean) {
        float2 total = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int v = 0; v < kWarps; ++v) total.x += row_sums[v][m].x, total.y += row_sums[v][m].y;
        mean = centered ? total.x / float(K) : 0.0f;
        scale = rsqrtf(fmaxf(total.y / float(K) - mean * mean, 0.0f) + norm.eps);
      };
      factors(m0, scale0, mean0);
      factors(m1, scale1, mean1);
    }
    float4 s = partial[buf][0][lane];
#pragma unroll
    for (int v = 1; v < kWarps; ++v) {
      const float4 p = partial[buf][v][lane];
      s.x += p.x, s.y += p.y, s.z += p.z, s.w += p.w;
    }
    // s = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1] with D[r][m] = y[m][tile row r].
    s.x *= row_scale.x, s.y *= row_scale.x, s.z *= row_scale.y, s.w *= row_scale.y;
    if (centered) {
      s.x -= mean0 * row_sum.x, s.y -= mean1 * row_sum.x;
      s.z -= mean0 * row_sum.y, s.w -= mean1 * row_sum.y;
    }
    if (m0 < M) epi.store(m0, info0, pre0, tile, g, s.x * scale0, s.z * scale0);
    if (m1 < M) epi.store(m1, info1, pre1, tile, g, s.y * scale1, s.w * scale1);
  }
}

// Blocks for `tiles` tiles: at most SMs x kGridBlocksPerSm (and what the GPU holds at once of this
// kernel instance, queried on its first launch and cached: one device model per process), spread
// so every block gets the same number of tiles (ceil(tiles / grid), a few one less).
template <typename T, typename W, typename Epilogue, bool kNormInput, bool kGrouped>
int grid_for(int tiles) {
  static const int resident = [] {
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, skinny_kernel<T, W, Epilogue, kNormInput, kGrouped>, kThreads,
            ring_bytes<W, kGrouped>()) != cudaSuccess) {
      (void)cudaGetLastError();  // clear it: the launch reports a broken device
      per_sm = kMinBlocks;
    }
    return current_gpu().sms * std::clamp(per_sm, 1, kGridBlocksPerSm);
  }();
  const int rounds = (tiles + resident - 1) / resident;
  return (tiles + rounds - 1) / rounds;
}

template <typename T, typename W, bool kNormInput, bool kGrouped = false, typename Epilogue>
void launch_stream(const T* x, const W* w, const float* w_scale, int group, const Epilogue& epi,
                   int M, int K, const InputNorm& norm, cudaStream_t stream) {
  const int tiles = epi.tiles();
  if (M <= 0 || tiles <= 0) return;
  auto* kernel = skinny_kernel<T, W, Epilogue, kNormInput, kGrouped>;
  // Raised on every launch (cheap, per device, allowed during graph capture), and before the
  // occupancy query in grid_for.
  constexpr int smem = ring_bytes<W, kGrouped>();
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const int grid = grid_for<T, W, Epilogue, kNormInput, kGrouped>(tiles);
  if (LMX_GEMV_PDL)
    pdl::launch_dependent(kernel, dim3(grid), dim3(kThreads), smem, stream, x, w, w_scale, group,
                          epi, M, K, norm);
  else
    kernel<<<grid, kThreads, smem, stream>>>(x, w, w_scale, group, epi, M, K, norm);
}

// One-byte weights W with row scales, or grouped ones.
template <typename T, typename W, bool kNormInput, typename Epilogue>
void launch_bytes(const T* x, const W* q, const LinearWeights<T>& w, const Epilogue& epi, int M,
                  const InputNorm& norm, cudaStream_t stream) {
  if (w.grouped())
    return launch_stream<T, W, kNormInput, true>(x, q, w.q_scale, w.group, epi, M, w.in, norm,
                                                 stream);
  launch_stream<T, W, kNormInput>(x, q, w.q_scale, 0, epi, M, w.in, norm, stream);
}

// w's weights in T or, when w.quantized(), its int8 values or E4M3 codes and row scales
// (K % 16 == 0) or grouped scales (group % 64 == 0, dividing K).
template <typename T, bool kNormInput, typename Epilogue>
void launch(const T* x, const LinearWeights<T>& w, const Epilogue& epi, int M,
            const InputNorm& norm, cudaStream_t stream) {
  if (!w.quantized())
    return launch_stream<T, T, kNormInput>(x, w.weight, nullptr, 0, epi, M, w.in, norm, stream);
  const char* kind = w.fp8() ? "E4M3" : "int8";
  if (w.in % 16 != 0 || !w.q_scale)
    throw std::invalid_argument(std::string("skinny linear: ") + kind +
                                " weights need K % 16 == 0 and scales (K = " +
                                std::to_string(w.in) + ")");
  if (w.grouped() && !scale_groups_supported(w.group, w.in))
    throw std::invalid_argument(std::string("skinny linear: ") + kind + " weights grouped by " +
                                std::to_string(w.group) + " of K = " + std::to_string(w.in) +
                                ": the GEMV needs groups of a multiple of " +
                                std::to_string(kScaleGroupStep) + " that divide K");
  if (w.fp8())
    return launch_bytes<T, KvFp8, kNormInput>(x, reinterpret_cast<const KvFp8*>(w.q), w, epi, M,
                                              norm, stream);
  launch_bytes<T, int8_t, kNormInput>(x, w.q, w, epi, M, norm, stream);
}

// The launchers whose epilogue adds no bias refuse one rather than drop it.
template <typename T>
void require_no_bias(const LinearWeights<T>& w, const char* launcher) {
  if (w.bias)
    throw std::invalid_argument(std::string(launcher) +
                                ": adds no bias (pass w.without_bias() and add it in a fused op)");
}

}  // namespace

bool skinny_supported(int M, int K, bool byte_weights) {
  return M >= 1 && M <= kSkinnyMaxRows && K % (byte_weights ? 16 : 8) == 0;
}

template <typename T>
void skinny_linear(const T* x, const LinearWeights<T>& w, T* y, int M, cudaStream_t stream) {
  require_no_bias(w, "skinny_linear");
  launch<T, false>(x, w, StoreRows<T>{{}, y, w.out}, M, {}, stream);
}

template <typename T>
void skinny_linear_f32_out(const T* x, const LinearWeights<T>& w, float* y, int M,
                           cudaStream_t stream) {
  require_no_bias(w, "skinny_linear_f32_out");
  launch<T, false>(x, w, StoreRows<float>{{}, y, w.out}, M, {}, stream);
}

template <typename T>
void skinny_linear_norm(const T* x, const InputNorm& norm, const LinearWeights<T>& w, T* y, int M,
                        cudaStream_t stream) {
  require_no_bias(w, "skinny_linear_norm");
  launch<T, true>(x, w, StoreRows<T>{{}, y, w.out}, M, norm, stream);
}

template <typename T>
void skinny_linear_norm_act(ActivationKind kind, const T* x, const InputNorm& norm,
                            const LinearWeights<T>& w, T* y, int M, cudaStream_t stream) {
  detail::with_activation(kind, [&](auto a) {
    launch<T, true>(x, w, BiasActivation<T, decltype(a)::value>{{}, y, w.bias, w.out}, M, norm,
                    stream);
  });
}

template <typename T>
void skinny_linear_norm_gated(ActivationKind kind, const T* x, const InputNorm& norm,
                              const LinearWeights<T>& w, T* y, int M, cudaStream_t stream) {
  if (w.out % 2 != 0)
    throw std::invalid_argument("skinny_linear_norm_gated: w.out = " + std::to_string(w.out) +
                                " is not 2 x inter (gate rows, then up rows)");
  const int inter = w.out / 2;
  detail::with_activation(kind, [&](auto a) {
    launch<T, true>(x, w, GatedActivation<T, decltype(a)::value>{{}, y, w.bias, inter}, M, norm,
                    stream);
  });
}

template <typename T>
void skinny_linear_add(const T* x, const LinearWeights<T>& w, T* residual, int M,
                       cudaStream_t stream) {
  launch<T, false>(x, w, AddToResidual<T>{{}, residual, w.bias, w.out}, M, {}, stream);
}

bool rope_epilogue_supported(int rotary_dim, int head_dim) {
  return rotary_dim > 0 && rotary_dim % 16 == 0 && head_dim % 16 == 0 && rotary_dim <= head_dim;
}

template <typename T, typename C>
void skinny_linear_norm_rope_kv(const T* x, const InputNorm& norm, const LinearWeights<T>& w,
                                T* qkv, const int32_t* token_pos, const float* inv_freq,
                                int rotary_dim, int heads, C* k_cache, C* v_cache,
                                const int32_t* block_tables, const int32_t* token_seq, int M,
                                const PagedKvLayout& layout, cudaStream_t stream) {
  const RopeKvWrite<T, C> epi{qkv,      w.out,      w.bias, token_pos, token_seq, block_tables,
                              inv_freq, rotary_dim, heads,  k_cache,   v_cache,   layout};
  launch<T, true>(x, w, epi, M, norm, stream);
}

#define LMX_INSTANTIATE_ROPE_KV(T, C)                                                             \
  template void skinny_linear_norm_rope_kv<T, C>(                                                 \
      const T*, const InputNorm&, const LinearWeights<T>&, T*, const int32_t*, const float*, int, \
      int, C*, C*, const int32_t*, const int32_t*, int, const PagedKvLayout&, cudaStream_t);
LMX_KV_CACHE_TYPES_16BIT(LMX_INSTANTIATE_ROPE_KV)
#undef LMX_INSTANTIATE_ROPE_KV

#define LMX_INSTANTIATE(T)                                                                     \
  template void skinny_linear<T>(const T*, const LinearWeights<T>&, T*, int, cudaStream_t);    \
  template void skinny_linear_f32_out<T>(const T*, const LinearWeights<T>&, float*, int,       \
                                         cudaStream_t);                                        \
  template void skinny_linear_norm<T>(const T*, const InputNorm&, const LinearWeights<T>&, T*, \
                                      int, cudaStream_t);                                      \
  template void skinny_linear_norm_act<T>(ActivationKind, const T*, const InputNorm&,          \
                                          const LinearWeights<T>&, T*, int, cudaStream_t);     \
  template void skinny_linear_norm_gated<T>(ActivationKind, const T*, const InputNorm&,        \
                                            const LinearWeights<T>&, T*, int, cudaStream_t);   \
  template void skinny_linear_add<T>(const T*, const LinearWeights<T>&, T*, int, cudaStream_t);
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
