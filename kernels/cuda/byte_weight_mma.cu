// The W8A16 GEMM's mma.sync kernel (kernels/byte_weight_gemm.h; every GPU, grouped scales):
// y [M, N] = x [M, K] · dequant(w)^T, one-byte weights (int8 or E4M3), 16-bit activations.
//
// The weights are the mma's A operand and x its B operand (y^T = W · x^T, as in the decode GEMV,
// gemv.cu): a warp multiplies 16-row tiles of weights by 8-row tiles of x, so a batch of 16 or
// 32 decode rows pads to 8, not to 64.
//
// - A block computes a [kRowsN weights x kRowsM x rows] tile of y over its share of K, in stages
//   of kStageK k (64 or 128): the stage's weight bytes (kRowsN x kStageK) and x (kRowsM x 2
//   kStageK bytes) are copied into a ring of kStages stages with cp.async (each thread's sources
//   computed once), the next stages' copies in flight while one is multiplied.
// - In each 64-k group of a stage a lane reads 16 weight bytes of rows g and g + 8 (k 16t .. 16t
//   + 15 of the group, g = lane / 4, t = lane % 4; int8 in kernels/int8_layout.h's order), widens
//   them to two 8-k chunks of T in column order in registers (exact; byte_weights.cuh) and
//   multiplies each with the 16 bytes of x holding the same 8 k (chunks 2t
//   and 2t + 1 of the group's x row): the k order inside an mma is permuted the same way on both
//   operands (a dot product does not care), so every shared-memory read is one 16-byte load.
//   Rows of 128 bytes or more are stored with chunks swapped by the row's parity (swizzle()), so
//   that the 8 lanes of a quarter-warp, which read two rows, hit 8 different bank groups.
// - Few tiles (small M, small N) split K over `splits` blocks a tile (blockIdx.y). Each writes
//   its fp32 sums to the workspace; the last of a tile to finish (an atomic count a tile) adds the
//   splits' sums in split order (the same result whichever block is last), scales and stores,
//   and sets the count back to zero for the next call.
// - Tiles are dealt in groups of 8 x-row tiles (blockIdx.x), so that blocks running together
//   share x rows and weight rows in L2 when M is large.
// - Grouped scales (one a row per `group` k, a multiple of 64): each 64-k group's mma products go
//   to sums of their own, which are multiplied by the rows' scales of that group and added to the
//   tile's; a stage's scales are loaded into registers while the stage before is multiplied.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/byte_weight_gemm.cuh"
#include "kernels/cuda/byte_weights.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/mma.cuh"

namespace lmx::kernels::cuda::byte_gemm {
namespace {

constexpr int kGroupK = 64;  // k a lane-group step: 16 bytes of a weight row a lane, 4 lanes

// A block's shape: kWarpsN x kWarpsM warps, each multiplying kTilesN 16-row weight tiles by
// kTilesM 8-row x tiles, over stages of kStageK k (kStageK bytes of a weight row, 2 kStageK of
// an x row) in a ring of kStages.
template <int WarpsN, int WarpsM, int TilesN, int TilesM, int StageK, int Stages>
struct Config {
  static constexpr int kWarpsN = WarpsN, kWarpsM = WarpsM, kTilesN = TilesN, kTilesM = TilesM;
  static constexpr int kStageK = StageK, kStages = Stages;
  static constexpr int kGroups = StageK / kGroupK;  // 64-k groups a stage
  static constexpr int kThreads = kWarpsN * kWarpsM * 32;
  static constexpr int kRowsN = 16 * TilesN * WarpsN;  // weight rows (y columns) a block
  static constexpr int kRowsM = 8 * TilesM * WarpsM;   // x rows (y rows) a block
  static constexpr int kWChunks = StageK / 16, kXChunks = StageK / 8;  // 16-byte chunks a row
  static constexpr int kWBytes = kRowsN * StageK;
  static constexpr int kStageBytes = kWBytes + kRowsM * StageK * 2;
  static constexpr int kSmem = Stages * kStageBytes;
  // Chunks a thread copies a stage: weights divide evenly over the threads in every shape below;
  // x may not (the kernel skips a thread's last copy past the tile).
  static constexpr int kWCopies = kRowsN * kWChunks / kThreads;
  static constexpr int kXCopies = (kRowsM * kXChunks + kThreads - 1) / kThreads;
  static_assert(StageK % kGroupK == 0 && kRowsN * kWChunks % kThreads == 0);
  static_assert(kSmem <= 200 * 1024);
};
// By M: decode batches (one x tile of up to 32 rows, weights over 8 warps), then tiles of 64 x
// rows (more rows: several tiles). A 128-row tile (2 x 4 warps of 4 x 4 mma tiles, 1 block an
// SM by its registers) measured slower than two 64-row ones at 128 and 256 rows (H100, Llama-2-7B
// shapes: bench/RESULTS.md), so there is none.
using Rows8 = Config<8, 1, 1, 1, 128, 4>;
using Rows16 = Config<8, 1, 1, 2, 128, 4>;
using Rows32 = Config<8, 1, 1, 4, 128, 4>;
using Rows64 = Config<4, 2, 2, 4, 64, 4>;

// Where 16-byte chunk c of row r sits in its stage row: rows of 8 or more chunks (128 bytes) have
// their chunks swapped so that the two rows a quarter-warp reads fall in different bank groups
// (weights: the half-line of 4 chunks, x: pairs of chunks, by the row's parity).
template <int Chunks, int Flip>
__device__ __forceinline__ int swizzle(int r, int c) {
  return Chunks >= 8 ? c ^ ((r & 1) * Flip) : c;
}

// A thread's copy of one 16-byte chunk a stage, fixed but for k: its source at the split's first
// stage (it moves kStageK elements a stage), its k within a stage, its place in a ring slot, and
// whether its row exists (rows past the matrix are zero-filled, never read).
struct Copy {
  const void* src;
  int k, dst;
  bool row;
};
// Chunk c of a stage of `base` ([*, K] of E, Chunks 16-byte chunks a stage row): row first_row +
// c / Chunks (existing below rows_end), landing at dst0 + its row's Chunks x 16 bytes + its
// swizzled chunk.
template <int Chunks, int Flip, typename E>
__device__ __forceinline__ Copy chunk_copy(const E* base, int c, int first_row, int rows_end,
                                           int K, int k_first, int dst0) {
  constexpr int kElems = 16 / int(sizeof(E));
  const int r = c / Chunks, cc = c % Chunks, row = first_row + r;
  const bool exists = row < rows_end;
  return {base + size_t(exists ? row : 0) * K + k_first + cc * kElems, cc * kElems,
          dst0 + r * Chunks * 16 + swizzle<Chunks, Flip>(r, cc) * 16, exists};
}

// The block shape for M rows: the smallest whose x tile holds them, up to `max_rows` (more rows
// than a tile holds take several x-row tiles).
template <typename F>
void with_config(int M, int max_rows, F&& f) {
  M = std::min(M, max_rows);
  if (M <= 8) return f(Rows8{});
  if (M <= 16) return f(Rows16{});
  if (M <= 32) return f(Rows32{});
  f(Rows64{});
}

// c += the 16 x 8 product over a quad's 32 k (8 a lane): w_lo / w_hi (the lane's 8 k of weight
// rows g and g + 8, as T) against xv (the same 8 k of x row g); two mma, 4 k of the lane's each.
template <typename T>
__device__ __forceinline__ void mma_chunk(float (&c)[4], const uint4& w_lo, const uint4& w_hi,
                                          const uint4& xv) {
  const uint32_t a0[4] = {w_lo.x, w_hi.x, w_lo.y, w_hi.y}, a1[4] = {w_lo.z, w_hi.z, w_lo.w, w_hi.w};
  mma_m16n8k16<T>(c, a0, xv.x, xv.y);
  mma_m16n8k16<T>(c, a1, xv.z, xv.w);
}

template <typename C, typename T, typename W, typename Out, bool kGrouped>
__global__ void __launch_bounds__(C::kThreads) byte_weight_gemm_kernel(const Args<T, Out> a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int warp_n = warp % C::kWarpsN, warp_m = warp / C::kWarpsN;
  int tile_m, tile_n;
  tile_of(blockIdx.x, a.tiles_m, a.tiles_n, tile_m, tile_n);
  const int n0 = tile_n * C::kRowsN, m0 = tile_m * C::kRowsM;
  const int split = blockIdx.y;
  const int all_stages = (a.K + C::kStageK - 1) / C::kStageK;
  const int first_stage = split * a.stages_per_split;
  const int stages = min(all_stages, first_stage + a.stages_per_split) - first_stage;

  // This thread's copies (chunk_copy), at the split's first stage.
  const int k_first = first_stage * C::kStageK;
  Copy wc[C::kWCopies], xc[C::kXCopies];
#pragma unroll
  for (int i = 0; i < C::kWCopies; ++i)
    wc[i] = chunk_copy<C::kWChunks, 4>(a.q, threadIdx.x + i * C::kThreads, n0, a.N, a.K, k_first,
                                       0);
#pragma unroll
  for (int i = 0; i < C::kXCopies; ++i)
    xc[i] = chunk_copy<C::kXChunks, 1>(a.x, threadIdx.x + i * C::kThreads, m0, a.M, a.K, k_first,
                                       C::kWBytes);
  // Copies step `step`'s stage of this block's share into ring slot `slot` (zeros past N, M and
  // K; K % 16 == 0, so a chunk is whole or past the end).
  const int start = byte_gemm::rotation_start(a.rotate, stages);
  auto load_stage = [&](int step, int slot) {
    const int s = byte_gemm::rotated(step, stages, start);
    unsigned char* base = smem + slot * C::kStageBytes;
    const int k0 = (first_stage + s) * C::kStageK;
#pragma unroll
    for (int i = 0; i < C::kWCopies; ++i) {
      const bool valid = wc[i].row && k0 + wc[i].k < a.K;
      cp_async16_stream(base + wc[i].dst,
                        valid ? static_cast<const uint8_t*>(wc[i].src) + s * C::kStageK : a.q,
                        valid);
    }
#pragma unroll
    for (int i = 0; i < C::kXCopies; ++i) {
      // A thread's last copy may be past the tile (x chunks need not divide over the threads).
      if (C::kRowsM * C::kXChunks % C::kThreads != 0 &&
          threadIdx.x + i * C::kThreads >= C::kRowsM * C::kXChunks)
        continue;
      const bool valid = xc[i].row && k0 + xc[i].k < a.K;
      cp_async16_stream(base + xc[i].dst,
                        valid ? static_cast<const T*>(xc[i].src) + s * C::kStageK : a.x, valid);
    }
  };

  // Grouped: the scales of weight rows g and g + 8 of each tile for each 64-k group of step
  // `step`'s stage (zero past K and past the last step; K % 64 == 0 there, so a group is whole or
  // past the end).
  using StageScales = float2[C::kGroups][C::kTilesN];
  auto load_scales = [&](int step, StageScales& out) {
    const int groups = a.K / max(a.group, 1);
    const bool in_split = step < stages;
    const int s = in_split ? byte_gemm::rotated(step, stages, start) : 0;
#pragma unroll
    for (int q = 0; q < C::kGroups; ++q) {
      const int k = (first_stage + s) * C::kStageK + q * kGroupK;
#pragma unroll
      for (int i = 0; i < C::kTilesN; ++i) {
        const int n = n0 + (warp_n * C::kTilesN + i) * 16 + g;
        const float* row = a.scale + size_t(k / max(a.group, 1));
        out[q][i] = k < a.K && in_split
                        ? make_float2(n < a.N ? __ldg(row + size_t(n) * groups) : 0.0f,
                                      n + 8 < a.N ? __ldg(row + size_t(n + 8) * groups) : 0.0f)
                        : make_float2(0.0f, 0.0f);
      }
    }
  };
  StageScales scales{}, next_scales{};
  if constexpr (kGrouped) load_scales(0, next_scales);

  float acc[C::kTilesN][C::kTilesM][4] = {};
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < stages) load_stage(s, s);
    cp_async_commit();
  }
  for (int s = 0; s < stages; ++s) {
    if constexpr (kGrouped) {
#pragma unroll
      for (int q = 0; q < C::kGroups; ++q)
#pragma unroll
        for (int i = 0; i < C::kTilesN; ++i) scales[q][i] = next_scales[q][i];
      load_scales(s + 1, next_scales);  // in flight under this stage's mma
    }
    cp_async_wait<C::kStages - 2>();
    __syncthreads();  // stage s is in; every warp is done with the slot the next copy overwrites
    if (s + C::kStages - 1 < stages)
      load_stage(s + C::kStages - 1, (s + C::kStages - 1) % C::kStages);
    cp_async_commit();
    const unsigned char* sw = smem + (s % C::kStages) * C::kStageBytes;
    const unsigned char* sx = sw + C::kWBytes;
#pragma unroll
    for (int q = 0; q < C::kGroups; ++q) {  // k 64q .. 64q + 63 of the stage
      // Grouped: this group's products, scaled into acc after it; else straight into acc.
      float part[C::kTilesN][C::kTilesM][4] = {};
      auto& sums = kGrouped ? part : acc;
      uint4 wq[C::kTilesN][2];  // 16 weight bytes of rows g and g + 8 of each tile: k 16t.. + 15
#pragma unroll
      for (int i = 0; i < C::kTilesN; ++i) {
        const int r = (warp_n * C::kTilesN + i) * 16 + g;
        wq[i][0] = *reinterpret_cast<const uint4*>(sw + r * C::kStageK +
                                                   swizzle<C::kWChunks, 4>(r, 4 * q + t) * 16);
        wq[i][1] = *reinterpret_cast<const uint4*>(sw + (r + 8) * C::kStageK +
                                                   swizzle<C::kWChunks, 4>(r + 8, 4 * q + t) * 16);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // k 16t + 8h .. + 7 of the group
        uint4 xv[C::kTilesM];
#pragma unroll
        for (int j = 0; j < C::kTilesM; ++j) {
          const int r = (warp_m * C::kTilesM + j) * 8 + g;
          xv[j] = *reinterpret_cast<const uint4*>(
              sx + r * C::kStageK * 2 + swizzle<C::kXChunks, 1>(r, 8 * q + 2 * t + h) * 16);
        }
#pragma unroll
        for (int i = 0; i < C::kTilesN; ++i) {
          const uint4 lo = widen_group_half<T, W>(wq[i][0], h);
          const uint4 hi = widen_group_half<T, W>(wq[i][1], h);
#pragma unroll
          for (int j = 0; j < C::kTilesM; ++j) mma_chunk<T>(sums[i][j], lo, hi, xv[j]);
        }
      }
      if constexpr (kGrouped) {
        // part[i][j]: rows g (elements 0, 1) and g + 8 (2, 3) of tile i.
#pragma unroll
        for (int i = 0; i < C::kTilesN; ++i)
#pragma unroll
          for (int j = 0; j < C::kTilesM; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[i][j][e] += (e < 2 ? scales[q][i].x : scales[q][i].y) * part[i][j][e];
      }
    }
  }
  cp_async_wait<0>();

  // acc[i][j]: y[m][n], y[m + 1][n], y[m][n + 8], y[m + 1][n + 8] with n the tile's weight row g
  // and m its x row 2t. for_each(f): f(m, n, float& v) for each of them inside [M, N].
  auto for_each = [&](auto&& f) {
#pragma unroll
    for (int i = 0; i < C::kTilesN; ++i) {
      const int n = n0 + (warp_n * C::kTilesN + i) * 16 + g;
#pragma unroll
      for (int j = 0; j < C::kTilesM; ++j) {
        const int m = m0 + (warp_m * C::kTilesM + j) * 8 + 2 * t;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int mm = m + (e & 1), nn = n + (e >> 1) * 8;
          if (mm < a.M && nn < a.N) f(mm, nn, acc[i][j][e]);
        }
      }
    }
  };
  byte_gemm::finish_tile<kGrouped>(a, split, {m0, C::kRowsM, n0, C::kRowsN}, for_each);
}

template <typename C, typename T, typename W, typename Out>
void launch(const Args<T, Out>& args, cudaStream_t stream) {
  launch_tiles(args.group > 0 ? byte_weight_gemm_kernel<C, T, W, Out, true>
                              : byte_weight_gemm_kernel<C, T, W, Out, false>,
               C::kThreads, C::kSmem, args, stream);
}

}  // namespace

MmaTile mma_tile(int M, int max_rows) {
  MmaTile tile;
  with_config(M, max_rows, [&](auto c) {
    using C = decltype(c);
    tile = {C::kRowsM, C::kRowsN, C::kStageK};
  });
  return tile;
}

template <typename T, typename W, typename Out>
void launch_mma(const Args<T, Out>& args, int max_rows, cudaStream_t stream) {
  with_config(args.M, max_rows, [&](auto c) { launch<decltype(c), T, W, Out>(args, stream); });
}

LMX_BYTE_GEMM_INSTANTIATE(launch_mma, int)

}  // namespace lmx::kernels::cuda::byte_gemm
