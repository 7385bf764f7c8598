// W8A16 GEMM: y [M, N] = x [M, K] · dequant(w)^T with one-byte weights (int8 or E4M3, a scale an
// output row) and 16-bit activations (kernels/byte_weight_gemm.h).
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
//   + 15 of the group, g = lane / 4, t = lane % 4), widens them to two 8-k chunks of T in
//   registers (exact) and multiplies each with the 16 bytes of x holding the same 8 k (chunks 2t
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
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/byte_weight_gemm.h"
#include "kernels/cuda/byte_weight_gemm.cuh"
#include "kernels/cuda/byte_weights.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/mma.cuh"

namespace lmx::kernels::cuda {
namespace {

using byte_gemm::Args;
using byte_gemm::tile_of;

constexpr int kGroupK = 64;  // k a lane-group step: 16 bytes of a weight row a lane, 4 lanes
constexpr int kMaxSplits = 8;
constexpr int kMinStagesPerSplit = 4;

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

  // This thread's copies, fixed but for k: the chunk's source at the split's first stage (it
  // moves kStageK elements a stage), its k within a stage, its place in a ring slot, and whether
  // its row exists (rows past N and M are zero-filled, never read).
  struct Copy {
    const void* src;
    int k, dst;
    bool row;
  };
  Copy wc[C::kWCopies], xc[C::kXCopies];
  const int k_first = first_stage * C::kStageK;
#pragma unroll
  for (int i = 0; i < C::kWCopies; ++i) {
    const int c = threadIdx.x + i * C::kThreads, r = c / C::kWChunks, cc = c % C::kWChunks;
    const int n = n0 + r;
    wc[i].row = n < a.N;
    wc[i].k = cc * 16;
    wc[i].src = a.q + size_t(wc[i].row ? n : 0) * a.K + k_first + cc * 16;
    wc[i].dst = r * C::kStageK + swizzle<C::kWChunks, 4>(r, cc) * 16;
  }
#pragma unroll
  for (int i = 0; i < C::kXCopies; ++i) {
    const int c = threadIdx.x + i * C::kThreads, r = c / C::kXChunks, cc = c % C::kXChunks;
    const int m = m0 + r;
    xc[i].row = m < a.M;
    xc[i].k = cc * 8;
    xc[i].src = a.x + size_t(xc[i].row ? m : 0) * a.K + k_first + cc * 8;
    xc[i].dst = C::kWBytes + r * C::kStageK * 2 + swizzle<C::kXChunks, 1>(r, cc) * 16;
  }
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
        wq[i][0] = *reinterpret_cast<const uint4*>(
            sw + r * C::kStageK + swizzle<C::kWChunks, 4>(r, 4 * q + t) * 16);
        wq[i][1] = *reinterpret_cast<const uint4*>(
            sw + (r + 8) * C::kStageK + swizzle<C::kWChunks, 4>(r + 8, 4 * q + t) * 16);
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
          const uint4 lo = h ? widen_bytes8<T, W>(wq[i][0].z, wq[i][0].w)
                             : widen_bytes8<T, W>(wq[i][0].x, wq[i][0].y);
          const uint4 hi = h ? widen_bytes8<T, W>(wq[i][1].z, wq[i][1].w)
                             : widen_bytes8<T, W>(wq[i][1].x, wq[i][1].y);
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
  byte_gemm::finish_tile<kGrouped>(a, split, for_each);
}

template <typename C, typename T, typename W, typename Out>
void launch(const Args<T, Out>& args, cudaStream_t stream) {
  auto* kernel = args.group > 0 ? byte_weight_gemm_kernel<C, T, W, Out, true>
                                : byte_weight_gemm_kernel<C, T, W, Out, false>;
  // Raised on every launch (cheap, allowed during graph capture).
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  kernel<<<dim3(args.tiles_m * args.tiles_n, args.splits), C::kThreads, C::kSmem, stream>>>(args);
}

}  // namespace

ByteWeightGemm::ByteWeightGemm(const Options& options)
    : options_(options), partial_floats_(options.workspace_bytes / sizeof(float)) {
  options_.blocks_per_sm = std::max(1, options_.blocks_per_sm);
  options_.max_tile_rows = std::max(1, options_.max_tile_rows);
  const byte_gemm::WgmmaShape forced{options_.wgmma_rows_m, options_.wgmma_rows_n};
  if ((forced.rows_m != 0 || forced.rows_n != 0) && !byte_gemm::wgmma_shape_exists(forced))
    throw std::invalid_argument("byte-weight GEMM: no wgmma tile of " +
                                std::to_string(forced.rows_m) + " x " +
                                std::to_string(forced.rows_n) +
                                " x rows by weight rows (64 x 128, 128 x 128, 128 x 256)");
  int dev = 0, major = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  hopper_ = major == 9;
  if (e == cudaSuccess && partial_floats_ > 0)
    e = cudaMalloc(&partials_, partial_floats_ * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc(&counters_, byte_gemm::kMaxSplitTiles * sizeof(int));
  if (e == cudaSuccess) e = cudaMemset(counters_, 0, byte_gemm::kMaxSplitTiles * sizeof(int));
  if (e != cudaSuccess) {
    cudaFree(partials_);
    cudaFree(counters_);
    throw std::runtime_error(std::string("byte-weight GEMM: workspace: ") + cudaGetErrorString(e));
  }
}

ByteWeightGemm::~ByteWeightGemm() {
  cudaFree(partials_);
  cudaFree(counters_);
}

namespace {

// The wgmma kernel's tile for an M x N call, or 0 x 0 for the mma.sync kernel: on Hopper, from
// options.wgmma_min_rows rows, scales one a row. Of its tiles, the one with the least time by
// rounds x cost: rounds = ceil(tiles / (SMs x the tile's blocks an SM)), cost a round relative to
// 128 x 128 as measured (H100, Llama-2-7B projections at 128 to 4096 rows, bench/RESULTS.md):
// 64 x 128 (two an SM) 1.1, 128 x 128 1.0, 128 x 256 1.6 (up to 64 rows: 64 x 128 only). Its
// K is never split (split sums made
// o and down 1.5-6x slower there), so a call whose best tile leaves more than half the SMs
// without a tile (N = 4096 at 64-256 rows) takes the mma.sync kernel, which splits K.
byte_gemm::WgmmaShape wgmma_shape(const ByteWeightGemm::Options& o, bool hopper, int sms, int M,
                                  int N, bool grouped) {
  if (!hopper || grouped || M < o.wgmma_min_rows) return {};
  if (o.wgmma_rows_m != 0) return {o.wgmma_rows_m, o.wgmma_rows_n};
  struct Candidate {
    byte_gemm::WgmmaShape shape;
    double cost;
  };
  constexpr Candidate kCandidates[] = {{{64, 128}, 1.1}, {{128, 128}, 1.0}, {{128, 256}, 1.6}};
  auto tiles = [&](byte_gemm::WgmmaShape s) {
    return double((M + s.rows_m - 1) / s.rows_m) * double((N + s.rows_n - 1) / s.rows_n);
  };
  const Candidate* best = nullptr;
  double best_time = 0.0;
  for (const Candidate& c : kCandidates) {
    // Up to 64 rows only the 64-row tile: a 128-row one multiplies as many zero rows as real
    // ones (qkv at 64 rows: 55.5 against 51.3 us).
    if (M <= 64 && c.shape.rows_m > 64) continue;
    const double slots = double(std::max(1, sms)) * byte_gemm::wgmma_blocks_per_sm(c.shape);
    const double time = std::ceil(tiles(c.shape) / slots) * c.cost;
    if (!best || time < best_time) best = &c, best_time = time;
  }
  if (2.0 * tiles(best->shape) < double(std::max(1, sms))) return {};
  return best->shape;
}

}  // namespace

ByteWeightGemm::Plan ByteWeightGemm::plan(int M, int N, int K, bool grouped) const {
  Plan p;
  if (const auto shape = wgmma_shape(options_, hopper_, sms_, M, N, grouped); shape.rows_m != 0) {
    p.wgmma = true;
    p.rows_per_tile = shape.rows_m;
    p.weight_rows_per_tile = shape.rows_n;
    p.tiles_m = (M + p.rows_per_tile - 1) / p.rows_per_tile;
    p.tiles_n = (N + p.weight_rows_per_tile - 1) / p.weight_rows_per_tile;
    p.stages_per_split = (K + byte_gemm::kWgmmaStageK - 1) / byte_gemm::kWgmmaStageK;
    return p;
  }
  int stages = 0;
  with_config(M, options_.max_tile_rows, [&](auto c) {
    using C = decltype(c);
    p.rows_per_tile = C::kRowsM;
    p.weight_rows_per_tile = C::kRowsN;
    stages = (K + C::kStageK - 1) / C::kStageK;
  });
  p.tiles_m = (M + p.rows_per_tile - 1) / p.rows_per_tile;
  p.tiles_n = (N + p.weight_rows_per_tile - 1) / p.weight_rows_per_tile;
  const int target = std::max(1, sms_) * options_.blocks_per_sm;
  int splits = std::min({target / std::max(1, p.tiles()), kMaxSplits, stages / kMinStagesPerSplit});
  if (p.tiles() > byte_gemm::kMaxSplitTiles) splits = 1;
  while (splits > 1 && size_t(splits) * size_t(M) * size_t(N) > partial_floats_) --splits;
  splits = std::max(1, splits);
  // No empty split: as many as the stages a split covers need.
  p.stages_per_split = (stages + splits - 1) / splits;
  p.splits = (stages + p.stages_per_split - 1) / p.stages_per_split;
  return p;
}

template <typename T, typename Out>
void ByteWeightGemm::run(const T* x, const LinearWeights<T>& w, Out* y, int M,
                         cudaStream_t stream) {
  if (!w.quantized())
    throw std::invalid_argument("byte-weight GEMM: the weights are in T, not bytes (run linear)");
  if (w.bias)
    throw std::invalid_argument(
        "byte-weight GEMM: adds no bias (pass w.without_bias() and add it in a fused op)");
  if (!supported(w.in) || !w.q_scale)
    throw std::invalid_argument("byte-weight GEMM: needs K % 16 == 0 and scales (K = " +
                                std::to_string(w.in) + ")");
  if (w.grouped() && !scale_groups_supported(w.group, w.in))
    throw std::invalid_argument("byte-weight GEMM: scales grouped by " + std::to_string(w.group) +
                                " of K = " + std::to_string(w.in) +
                                ": needs groups of a multiple of 64 that divide K");
  if (M <= 0 || w.out <= 0) return;
  const Plan p = plan(M, w.out, w.in, w.grouped());
  const Args<T, Out> args{x,
                          reinterpret_cast<const uint8_t*>(w.q),
                          w.q_scale,
                          y,
                          M,
                          w.out,
                          w.in,
                          w.grouped() ? w.group : 0,
                          p.tiles_m,
                          p.tiles_n,
                          p.splits,
                          p.stages_per_split,
                          partials_,
                          counters_,
                          options_.rotate_k};
  if (p.wgmma) {
    const byte_gemm::WgmmaShape shape{p.rows_per_tile, p.weight_rows_per_tile};
    if (w.fp8())
      return byte_gemm::launch_wgmma<T, KvFp8, Out>(args, shape, stream);
    return byte_gemm::launch_wgmma<T, int8_t, Out>(args, shape, stream);
  }
  with_config(M, options_.max_tile_rows, [&](auto c) {
    using C = decltype(c);
    if (w.fp8())
      launch<C, T, KvFp8, Out>(args, stream);
    else
      launch<C, T, int8_t, Out>(args, stream);
  });
}

#define LMX_INSTANTIATE(T)                                                                   \
  template void ByteWeightGemm::run<T, T>(const T*, const LinearWeights<T>&, T*, int,        \
                                          cudaStream_t);                                     \
  template void ByteWeightGemm::run<T, float>(const T*, const LinearWeights<T>&, float*, int, \
                                              cudaStream_t);
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
