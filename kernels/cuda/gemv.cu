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
//   (16 x 16 B a lane, 8 KB a warp) before its first mma, and 2 blocks of 8 warps fit an SM
//   (128 registers), so ~128 KB a SM are requested at once; weights are read with
//   ld.global.nc.L1::no_allocate.L2::256B (streamed once: L1 keeps x, L2 fetches 256-byte
//   blocks); x is read through L2 (.cg: it is written by the kernel this one overlaps).
// - The 8 warps of a block split K of the same tile (warp w takes k-steps w, w + 8, ...) and sum
//   their 16 x 8 partial tiles in shared memory, so even N = 4096 (256 tiles) gives 2048 warps
//   of independent streams, with no second kernel.
// - The grid is sized to the GPU (SMs x resident blocks, queried once) and the tiles are dealt
//   evenly: every block gets the same number of tiles, give or take one in a few blocks.
//
// Launchers allocate nothing and never synchronize (graph capture).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/pdl.cuh"
#include "kernels/gemm.h"

namespace lmx::kernels::cuda {
namespace {

// Tuning knobs, compile-time only (the defaults are the shipped configuration; the bench's
// header says how to build variants): warps a block, k-steps a warp iteration, and the resident
// blocks per SM that the register budget is sized for (65536 / (32 x warps x blocks) registers a
// thread: 8 warps x 2 blocks = 128, which 8 steps need). Measured in the Llama-2-7B fp16 decode
// step on an H100 (graphs, 2026-11-21): 8/8/2 5.34 ms at batch 1 and 6.55 at batch 8; 8/4/3
// 5.48 / 6.72; 4/8/4 5.52 / 7.06.
#ifndef LMX_GEMV_WARPS
#define LMX_GEMV_WARPS 8
#endif
#ifndef LMX_GEMV_STEPS
#define LMX_GEMV_STEPS 8
#endif
#ifndef LMX_GEMV_MIN_BLOCKS
#define LMX_GEMV_MIN_BLOCKS 2
#endif
#ifndef LMX_GEMV_PDL  // launch as a programmatic dependent (1) or plainly (0)
#define LMX_GEMV_PDL 1
#endif

constexpr int kTileRows = 16;           // weight rows per tile: the mma's M
constexpr int kWarps = LMX_GEMV_WARPS;  // warps a block, splitting K of one tile
constexpr int kThreads = kWarps * 32;
constexpr int kSteps = LMX_GEMV_STEPS;           // k-steps a warp iteration: 2 x 16 B loads each
constexpr int kMinBlocks = LMX_GEMV_MIN_BLOCKS;  // resident blocks per SM (register budget)
static_assert(kWarps >= 1 && kThreads <= 1024 && kSteps >= 1 && kMinBlocks >= 1);

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

// This warp's share of tile rows [n0, n0 + 16) over all of K: k-steps warp, warp + kWarps, ...
// w_lo / w_hi / xr point at the lane's first chunk (chunk 4 x warp + t) of weight rows g and
// g + 8 and of x row g; `left` is how many chunks of the row remain from the warp's first step
// (chunk 4 x warp): the same in every lane, so the loop, and with it the warp-wide mma, never
// diverges. Returns the lane's part of the 16 x 8 partial product (see mma_16x8x16's d).
//
// The kernel is launched as a programmatic dependent (kernels/cuda/pdl.cuh): with `wait` set (the
// block's first tile) the first iteration's weight loads are issued before waiting for the kernel
// that writes x, so the weight stream starts during that kernel's tail.
template <typename T>
__device__ __forceinline__ void tile_partial(float (&acc)[4], const uint4* w_lo, const uint4* w_hi,
                                             const uint4* xr, bool has_x, int t, int left,
                                             bool wait) {
  constexpr int kStride = kWarps * 4;  // chunks from one of the warp's steps to its next
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = 0.0f;
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
  }
  if (wait) pdl::wait_for_primary();  // this warp had no k-steps
}

// One block: tiles blockIdx.x, blockIdx.x + gridDim.x, ... of 16 weight rows; its warps split K
// and warp 0 sums their partial tiles (double-buffered, so one barrier a tile) and writes y.
template <typename T, typename Out>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    skinny_kernel(const T* __restrict__ x, const T* __restrict__ w, Out* __restrict__ y, int M,
                  int N, int K) {
  __shared__ float4 partial[2][kWarps][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // mma fragment row group and k pair
  const int chunks = K / 8;              // 16-byte chunks a row
  const int first = 4 * warp + t;        // the lane's first chunk: step `warp`, chunk t of it
  const bool has_x = g < M;              // x rows past M are the mma's zero padding
  const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(has_x ? g : 0) * K) + first;
  const int tiles = (N + kTileRows - 1) / kTileRows;
  int buf = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, buf ^= 1) {
    const int n_lo = tile * kTileRows + g, n_hi = n_lo + 8;
    // Rows past N read row N - 1 (in bounds, result dropped): no predicate in the hot loop.
    const uint4* w_lo = reinterpret_cast<const uint4*>(w + size_t(min(n_lo, N - 1)) * K) + first;
    const uint4* w_hi = reinterpret_cast<const uint4*>(w + size_t(min(n_hi, N - 1)) * K) + first;
    float acc[4];
    // x is the previous kernel's output (and y may still be read by it): the first tile waits.
    tile_partial<T>(acc, w_lo, w_hi, xr, has_x, t, chunks - 4 * warp, tile == int(blockIdx.x));
    partial[buf][warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (warp == 0) {
      float4 s = partial[buf][0][lane];
#pragma unroll
      for (int v = 1; v < kWarps; ++v) {
        const float4 p = partial[buf][v][lane];
        s.x += p.x, s.y += p.y, s.z += p.z, s.w += p.w;
      }
      // s = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1] with D[r][m] = y[m][tile row r].
      const int m0 = 2 * t, m1 = 2 * t + 1;
      if (n_lo < N) {
        if (m0 < M) y[size_t(m0) * N + n_lo] = Out(s.x);
        if (m1 < M) y[size_t(m1) * N + n_lo] = Out(s.y);
      }
      if (n_hi < N) {
        if (m0 < M) y[size_t(m0) * N + n_hi] = Out(s.z);
        if (m1 < M) y[size_t(m1) * N + n_hi] = Out(s.w);
      }
    }
  }
}

// Blocks for `tiles` tiles: at most what the GPU holds at once (SMs x resident blocks of this
// kernel, queried on the first call and cached: one device model per process), spread so every
// block gets the same number of tiles (ceil(tiles / grid), a few one less).
template <typename T, typename Out>
int grid_for(int tiles) {
  static const int resident = [] {
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, skinny_kernel<T, Out>, kThreads,
                                                      0) != cudaSuccess) {
      (void)cudaGetLastError();  // clear it: the launch reports a broken device
      sms = 132, per_sm = kMinBlocks;
    }
    return std::max(1, sms) * std::max(1, per_sm);
  }();
  const int rounds = (tiles + resident - 1) / resident;
  return (tiles + rounds - 1) / rounds;
}

template <typename T, typename Out>
void launch(const T* x, const T* w, Out* y, int M, int N, int K, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  const int tiles = (N + kTileRows - 1) / kTileRows;
  if (LMX_GEMV_PDL)
    pdl::launch_dependent(skinny_kernel<T, Out>, dim3(grid_for<T, Out>(tiles)), dim3(kThreads), 0,
                          stream, x, w, y, M, N, K);
  else
    skinny_kernel<T, Out><<<grid_for<T, Out>(tiles), kThreads, 0, stream>>>(x, w, y, M, N, K);
}

}  // namespace

bool skinny_supported(int M, int K) { return M >= 1 && M <= kSkinnyMaxRows && K % 8 == 0; }

template <typename T>
void skinny_linear(const T* x, const T* w, T* y, int M, int N, int K, cudaStream_t stream) {
  launch<T, T>(x, w, y, M, N, K, stream);
}

template <typename T>
void skinny_linear_f32_out(const T* x, const T* w, float* y, int M, int N, int K,
                           cudaStream_t stream) {
  launch<T, float>(x, w, y, M, N, K, stream);
}

template void skinny_linear<__half>(const __half*, const __half*, __half*, int, int, int,
                                    cudaStream_t);
template void skinny_linear<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                           __nv_bfloat16*, int, int, int, cudaStream_t);
template void skinny_linear_f32_out<__half>(const __half*, const __half*, float*, int, int, int,
                                            cudaStream_t);
template void skinny_linear_f32_out<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                   float*, int, int, int, cudaStream_t);

}  // namespace lmx::kernels::cuda
