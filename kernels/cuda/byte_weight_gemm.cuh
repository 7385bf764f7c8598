// What the two W8A16 GEMM kernels share (kernels/byte_weight_gemm.h): the call's arguments, the
// order tiles are dealt in, the end of a tile (a K split's sums added in split order, the row
// scales, the store), and each kernel's tiles and launch. byte_weight_mma.cu is the mma.sync
// kernel (every GPU; up to 64 x rows a tile, grouped scales), byte_weight_wgmma.cu the Hopper
// one (wgmma; 64 or 128 x rows a tile); byte_weight_gemm.cu plans a call and launches one.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/tile_order.cuh"

namespace lmx::kernels::cuda::byte_gemm {

inline constexpr int kWgmmaStageK = 128;     // k a stage of the wgmma kernel
inline constexpr int kMaxSplitTiles = 4096;  // tiles a split call may have (its counters)
inline constexpr int kMaxSplits = 8;         // blocks a tile's K may be split over

template <typename T, typename Out>
struct Args {
  const T* x;          // [M, K]
  const uint8_t* q;    // [N, K] bytes
  const float* scale;  // [N], or [N, K / group] when group > 0
  Out* y;              // [M, N]
  int M, N, K;
  int group;  // k a scale covers (a multiple of 64 dividing K); 0: one scale a row
  int tiles_m, tiles_n;
  int splits, stages_per_split;  // stages (a kernel's stage of k each) a split covers
  float* partials;               // [splits][M][N] when splits > 1
  int* counters;                 // [tiles] when splits > 1
  bool rotate;                   // each block starts at its own stage (rotation_start)
};

// Where a block's walk over its split's `stages` starts when Args::rotate: the blocks spread
// evenly over them (block b of B at stage b x stages / B), so that blocks running together read
// different k of the x rows they all share instead of the same lines at the same time; each then
// wraps around. A tile's order depends on its block index only: the same sums every call.
__device__ __forceinline__ int rotation_start(bool rotate, int stages) {
  return rotate ? int((long long)blockIdx.x * stages / gridDim.x) : 0;
}
// Step s of the walk starting at `start`: the stage it reads.
__device__ __forceinline__ int rotated(int s, int stages, int start) {
  const int r = s + start;
  return r >= stages ? r - stages : r;
}

template <typename Out>
__device__ __forceinline__ void store(Out* y, size_t i, float v) {
  if constexpr (std::is_same_v<Out, float>)
    y[i] = v;
  else
    y[i] = detail::from_f<Out>(v);
}

// A block's tile of y: rows m0 .. m0 + rows - 1 and columns n0 .. n0 + cols - 1 (cut at M and N).
struct Tile {
  int m0, rows, n0, cols;
};

// Vectors of the workspace a thread of add_splits has in flight at once (at least one a split).
inline constexpr int kAddVectorsInFlight = 8;

// y[at .. at + kWidth) = v (kWidth consecutive elements; 4 x Out aligned when kWidth == 4).
template <int kWidth, typename Out>
__device__ __forceinline__ void store_vector(Out* y, size_t at, const float (&v)[kWidth]) {
  detail::Pack<Out, kWidth> o;
#pragma unroll
  for (int e = 0; e < kWidth; ++e) o.v[e] = detail::from_f<Out>(v[e]);
  detail::store(y + at, 0, o);
}

// v = kWidth fp32 of the workspace at p (16-byte aligned when kWidth == 4), through L2.
template <int kWidth>
__device__ __forceinline__ void load_vector(const float* p, float (&v)[kWidth]) {
  if constexpr (kWidth == 1) {
    v[0] = __ldcg(p);
  } else {
    const float4 q = __ldcg(reinterpret_cast<const float4*>(p));
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  }
}

// add_splits for kSplits splits, over vectors of kWidth consecutive columns (kWidth divides cols
// and N): a thread loads a batch of vectors from every split (no branch between the loads, so
// they are all in flight together), then adds them in split order, scales and stores them.
template <int kSplits, int kWidth, bool kScaled, typename T, typename Out>
__device__ __forceinline__ void add_split_vectors(const Args<T, Out>& a, Tile tile, int rows,
                                                  int cols) {
  constexpr int kBatch = kSplits < kAddVectorsInFlight ? kAddVectorsInFlight / kSplits : 1;
  const size_t MN = size_t(a.M) * a.N;
  const int per_row = cols / kWidth, count = rows * per_row;
  for (int first = threadIdx.x; first < count; first += kBatch * blockDim.x) {
    size_t at[kBatch];
    float v[kSplits][kBatch][kWidth];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {  // past the tile: the batch's first vector again, unused
      const int i = first + b * blockDim.x < count ? first + b * blockDim.x : first;
      at[b] = size_t(tile.m0 + i / per_row) * a.N + tile.n0 + i % per_row * kWidth;
    }
#pragma unroll
    for (int s = 0; s < kSplits; ++s)
#pragma unroll
      for (int b = 0; b < kBatch; ++b) load_vector<kWidth>(a.partials + s * MN + at[b], v[s][b]);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (first + b * blockDim.x >= count) break;
#pragma unroll
      for (int s = 1; s < kSplits; ++s)
#pragma unroll
        for (int e = 0; e < kWidth; ++e) v[0][b][e] += v[s][b][e];
      if constexpr (!kScaled) {
        const size_t n = at[b] % a.N;
#pragma unroll
        for (int e = 0; e < kWidth; ++e) v[0][b][e] *= __ldg(a.scale + n + e);
      }
      store_vector<kWidth>(a.y, at[b], v[0][b]);
    }
  }
}

// add_split_vectors for the call's split count (2 .. kMaxSplits).
template <int kWidth, bool kScaled, typename T, typename Out, int... S>
__device__ __forceinline__ void add_split_vectors_of(const Args<T, Out>& a, Tile tile, int rows,
                                                     int cols, std::integer_sequence<int, S...>) {
  ((a.splits == S + 2 ? add_split_vectors<S + 2, kWidth, kScaled>(a, tile, rows, cols) : void()),
   ...);
}

// The last block of a split tile: every split's sums of `tile` added in split order (each from the
// workspace, the same fp32 adds whichever block came last), scaled by the row's scale (unless
// kScaled) and stored. The block's threads take the tile in row-major order, 4 columns at a time
// where rows and y allow 16-byte loads (N % 4 == 0, y aligned), a batch of them a thread with every
// split's loads in flight at once: with one element at a time, its adds and store before the next
// element's loads, a tile waited out an L2 round trip an element (the likely cause of split
// 128-row tiles staying slower than unsplit ones: bench/RESULTS.md).
template <bool kScaled, typename T, typename Out>
__device__ __forceinline__ void add_splits(const Args<T, Out>& a, Tile tile) {
  const int rows = min(tile.rows, a.M - tile.m0), cols = min(tile.cols, a.N - tile.n0);
  const bool vectors = a.N % 4 == 0 && reinterpret_cast<uintptr_t>(a.y) % (4 * sizeof(Out)) == 0;
  constexpr auto splits = std::make_integer_sequence<int, kMaxSplits - 1>{};
  if (vectors)
    add_split_vectors_of<4, kScaled>(a, tile, rows, cols, splits);
  else
    add_split_vectors_of<1, kScaled>(a, tile, rows, cols, splits);
}

// The end of `tile` (block blockIdx.x's) for split `split`: for_each(f) calls f(m, n, float& v)
// on each of the thread's sums inside [M, N]. Unsplit, the sums are scaled by the row's scale
// (unless kScaled: already scaled, per group or by the kernel) and stored. Split, each block writes
// its sums to the workspace; the last block of the tile to finish (an atomic count a tile) adds
// them (add_splits) and sets the count back to zero for the next call.
template <bool kScaled, typename T, typename Out, typename ForEach>
__device__ __forceinline__ void finish_tile(const Args<T, Out>& a, int split, Tile tile,
                                            ForEach&& for_each) {
  __shared__ int last_block;
  if (a.splits > 1) {
    const size_t MN = size_t(a.M) * a.N;
    for_each(
        [&](int m, int n, float& v) { __stcg(a.partials + split * MN + size_t(m) * a.N + n, v); });
    __threadfence();  // this block's sums are visible before its count
    __syncthreads();
    const int counter = blockIdx.x;
    if (threadIdx.x == 0) last_block = atomicAdd(a.counters + counter, 1) == a.splits - 1;
    __syncthreads();
    if (!last_block) return;
    __threadfence();
    add_splits<kScaled>(a, tile);
    if (threadIdx.x == 0) a.counters[counter] = 0;  // every other block of the tile has counted
    return;
  }
  // The row scales in a pass of their own: with no store to y between them the loads issue
  // together (with one before each, every load waited for the stores before it).
  if constexpr (!kScaled) for_each([&](int, int n, float& v) { v *= __ldg(a.scale + n); });
  for_each([&](int m, int n, float& v) { store(a.y, size_t(m) * a.N + n, v); });
}

// Launches kernel(lead..., args) over the plan's grid (a block a tile along x, a split of K along
// y: finish_tile counts a tile's splits by blockIdx.x) with `smem` bytes of dynamic shared memory,
// raised on every launch (cheap, allowed during graph capture). `lead`: what a kernel takes before
// its Args (the wgmma kernel's TMA maps). A launch error is left for cudaGetLastError, as with
// <<< >>>.
template <typename Kernel, typename T, typename Out, typename... Lead>
void launch_tiles(Kernel kernel, int threads, int smem, const Args<T, Out>& args,
                  cudaStream_t stream, const Lead&... lead) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(args.tiles_m * args.tiles_n, args.splits);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  (void)cudaLaunchKernelEx(&config, kernel, lead..., args);
}

// Explicit instantiations of a kernel's launcher, name(const Args<T, Out>&, Choice, cudaStream_t)
// with Choice what picks its tile, for every activation type T, weight byte type W and output
// Out (T, or fp32 for the LM head's logits) the kernels are built for.
#define LMX_BYTE_GEMM_LAUNCHER(name, Choice, T, W)                      \
  template void name<T, W, T>(const Args<T, T>&, Choice, cudaStream_t); \
  template void name<T, W, float>(const Args<T, float>&, Choice, cudaStream_t);
#define LMX_BYTE_GEMM_INSTANTIATE(name, Choice)               \
  LMX_BYTE_GEMM_LAUNCHER(name, Choice, __half, int8_t)        \
  LMX_BYTE_GEMM_LAUNCHER(name, Choice, __half, KvFp8)         \
  LMX_BYTE_GEMM_LAUNCHER(name, Choice, __nv_bfloat16, int8_t) \
  LMX_BYTE_GEMM_LAUNCHER(name, Choice, __nv_bfloat16, KvFp8)

// The mma.sync kernel (byte_weight_mma.cu): the tile it takes for M x rows (x rows and weight
// rows, and k a stage) with tiles of at most `max_rows` x rows, and its launch (args.M picks the
// tile the same way).
struct MmaTile {
  int rows_m = 0, rows_n = 0, stage_k = 0;
};
MmaTile mma_tile(int M, int max_rows);
template <typename T, typename W, typename Out>
void launch_mma(const Args<T, Out>& args, int max_rows, cudaStream_t stream);

// The wgmma kernel (byte_weight_wgmma.cu, sm_90a): its tile shapes, x rows by weight rows
// (64 x 128, 128 x 128; one block an SM), and its launch.
struct WgmmaShape {
  int rows_m = 0, rows_n = 0;
};
bool wgmma_shape_exists(WgmmaShape shape);
template <typename T, typename W, typename Out>
void launch_wgmma(const Args<T, Out>& args, WgmmaShape shape, cudaStream_t stream);

}  // namespace lmx::kernels::cuda::byte_gemm
