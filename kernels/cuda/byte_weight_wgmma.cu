// W8A16 GEMM on Hopper's warpgroup tensor cores (kernels/byte_weight_gemm.h, from 64 x rows):
//   y [M, N] = x [M, K] · dequant(w)^T, one-byte weights (int8 or E4M3, a scale a row), T x.
//
// The mma.sync kernel (byte_weight_mma.cu) widens every weight in the registers of each warp
// that multiplies it, once for every 8 x rows it multiplies: from 64 x rows on it is bound by
// issuing those instructions, not by memory (bench/RESULTS.md). Here each weight is widened once
// a block, into shared memory, and wgmma multiplies it by every x row of the block:
//
// - A block computes a [kRowsM x rows x kRowsN weight rows] tile of y over its share of K, in
//   stages of 64 k. Each stage's x (kRowsM rows x 64 T, 128 bytes a row) and weight bytes
//   (kRowsN rows x 64 bytes) are copied with cp.async into a ring of kStages slots, kStages - 2
//   stages ahead (a slot is refilled only after the products that read it are done).
// - x lands in the 128-byte swizzle wgmma reads (wgmma.cuh: chunk c of row r at c ^ (r % 8)).
//   The weight bytes land as they are; each thread widens the 16-byte chunks it copied itself
//   (16 weights of a row, exact) into two swizzled 16-byte chunks of T in one of two "wide"
//   buffers, so widening stage s overlaps the product of stage s - 1.
// - Warpgroup w multiplies x rows 64w .. 64w + 63 by the stage's kRowsN widened weight rows:
//   4 wgmma of k 16 (A = x, B = weights, both K-major), fp32 sums in registers, y = x · w^T with
//   no transposes anywhere.
// - Each block walks K from its own stage (byte_weight_gemm.cuh, rotation_start).
// - The end of a tile (split sums, the row scales, the store) is byte_weight_gemm.cuh's; the
//   planner never splits this kernel's K (byte_weight_gemm.cu, wgmma_shape).
// Not taken here: grouped scales (the wgmma sums run over the whole K; the mma.sync kernel
// scales each 64-k group's sums).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/byte_weight_gemm.cuh"
#include "kernels/cuda/byte_weights.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace lmx::kernels::cuda::byte_gemm {
namespace {

// A block: Groups warpgroups (64 x rows each) by kRowsN weight rows (wgmma's N), a ring of
// kStages stages of kWgmmaStageK k.
template <int Groups, int RowsN, int Stages>
struct Config {
  static constexpr int kRowsN = RowsN, kStages = Stages;
  static constexpr int kThreads = 128 * Groups;
  static constexpr int kRowsM = 64 * Groups;
  static constexpr int kXBytes = kRowsM * 128;            // a stage of x: [kRowsM][64] T
  static constexpr int kWBytes = kRowsN * kWgmmaStageK;   // a stage of weights: [kRowsN][64] B
  static constexpr int kWideBytes = kRowsN * 128;         // a stage of weights as T
  static constexpr int kXCopies = kRowsM * 8 / kThreads;  // 16-byte copies a thread a stage
  static constexpr int kWCopies = kRowsN * 4 / kThreads;
  // [kStages][x] [2][wide] [kStages][weight bytes], 1024-aligned at run time (the slack).
  static constexpr int kSmem = Stages * (kXBytes + kWBytes) + 2 * kWideBytes + 1024;
  static_assert(kRowsN * 4 % kThreads == 0 && Stages >= 3 && kSmem <= 227 * 1024);
};

// Byte offset of 16-byte chunk c of row r in a 128-byte-swizzled tile (wgmma.cuh).
__device__ __forceinline__ int swizzled(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

template <typename C, typename T, typename W, typename Out>
__global__ void __launch_bounds__(C::kThreads, 1) byte_weight_wgmma_kernel(const Args<T, Out> a) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const xs = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* const wide = xs + C::kStages * C::kXBytes;
  unsigned char* const wb = wide + 2 * C::kWideBytes;
  const int group = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  int tile_m, tile_n;
  tile_of(blockIdx.x, a.tiles_m, a.tiles_n, tile_m, tile_n);
  const int n0 = tile_n * C::kRowsN, m0 = tile_m * C::kRowsM;
  const int split = blockIdx.y;
  const int all_stages = (a.K + kWgmmaStageK - 1) / kWgmmaStageK;
  const int first_stage = split * a.stages_per_split;
  const int stages = min(all_stages, first_stage + a.stages_per_split) - first_stage;
  const int k_first = first_stage * kWgmmaStageK;

  // This thread's copies: 16-byte chunk xk / 8 of x rows x_row + i x kXRowStep and chunk wk / 16
  // of weight rows w_row + i x kWRowStep (i < kXCopies, kWCopies), at the split's first stage
  // (each stage moves them 64 k on). Rows past M and N are zero-filled: they add zeros.
  constexpr int kXRowStep = C::kThreads / 8, kWRowStep = C::kThreads / 4;
  const int x_row = threadIdx.x / 8, xk = threadIdx.x % 8 * 8;
  const int w_row = threadIdx.x / 4, wk = threadIdx.x % 4 * 16;
  const T* const x_src = a.x + size_t(m0 + x_row) * a.K + k_first + xk;
  const uint8_t* const w_src = a.q + size_t(n0 + w_row) * a.K + k_first + wk;
  const int x_dst = swizzled(x_row, xk / 8), w_dst = w_row * kWgmmaStageK + wk;
  // Step `step`'s stage of the split into ring slot `slot` (zeros past M, N and K; K % 16 == 0,
  // so a chunk is whole or past the end).
  const int start = rotation_start(a.rotate, stages);
  auto load_stage = [&](int step, int slot) {
    const int s = rotated(step, stages, start);
    const int k = (first_stage + s) * kWgmmaStageK;
#pragma unroll
    for (int i = 0; i < C::kXCopies; ++i) {
      const bool valid = m0 + x_row + i * kXRowStep < a.M && k + xk < a.K;
      const T* src = x_src + size_t(i) * kXRowStep * a.K + s * kWgmmaStageK;
      // + i x kXRowStep rows keeps row % 8, so the swizzle moves by whole rows.
      cp_async16(xs + slot * C::kXBytes + x_dst + i * kXRowStep * 128, valid ? src : a.x, valid);
    }
#pragma unroll
    for (int i = 0; i < C::kWCopies; ++i) {
      const bool valid = n0 + w_row + i * kWRowStep < a.N && k + wk < a.K;
      const uint8_t* src = w_src + size_t(i) * kWRowStep * a.K + s * kWgmmaStageK;
      cp_async16_stream(wb + slot * C::kWBytes + w_dst + i * kWRowStep * kWgmmaStageK,
                        valid ? src : a.q, valid);
    }
  };
  // The thread's own weight chunks of slot `slot`, widened into wide buffer `buf`.
  auto widen_stage = [&](int slot, int buf) {
#pragma unroll
    for (int i = 0; i < C::kWCopies; ++i) {
      const int r = w_row + i * kWRowStep, c = wk / 16;
      const uint4 q = *reinterpret_cast<const uint4*>(wb + slot * C::kWBytes + w_dst +
                                                      i * kWRowStep * kWgmmaStageK);
      uint4 lo, hi;
      widen_bytes16<T, W>(q, lo, hi);
      unsigned char* out = wide + buf * C::kWideBytes;
      *reinterpret_cast<uint4*>(out + swizzled(r, 2 * c)) = lo;
      *reinterpret_cast<uint4*>(out + swizzled(r, 2 * c + 1)) = hi;
    }
  };

  float acc[C::kRowsN / 2] = {};
  wgmma::fence_registers(acc);
#pragma unroll
  for (int s = 0; s < C::kStages - 2; ++s) {
    if (s < stages) load_stage(s, s);
    cp_async_commit();
  }
  for (int s = 0; s < stages; ++s) {
    const int slot = s % C::kStages, buf = s % 2;
    // This warpgroup's product of stage s - 2 is done (s - 1's may run on: the products chain
    // into the same registers, which nothing else touches until the last wait).
    wgmma::wait<1>();
    cp_async_wait<C::kStages - 3>();  // this thread's copies of stage s are in
    wgmma::fence_shared_for_async();
    // Every thread's stage s is in, and every warpgroup is done with stage s - 2: its slot and
    // its wide buffer (this stage's) may be written.
    __syncthreads();
    if (s + C::kStages - 2 < stages)
      load_stage(s + C::kStages - 2, (s + C::kStages - 2) % C::kStages);
    cp_async_commit();
    widen_stage(slot, buf);
    wgmma::fence_shared_for_async();
    __syncthreads();  // the whole stage widened
    wgmma::fence();
    const uint64_t da = wgmma::sw128_desc(xs + slot * C::kXBytes + group * 64 * 128);
    const uint64_t db = wgmma::sw128_desc(wide + buf * C::kWideBytes);
#pragma unroll
    for (int k = 0; k < kWgmmaStageK / 16; ++k)
      wgmma::wgmma_k16<T, C::kRowsN>(acc, da + 2 * k, db + 2 * k);  // + 32 bytes: 16 k on
    wgmma::commit();
  }
  wgmma::wait<0>();
  wgmma::fence_registers(acc);
  cp_async_wait<0>();

  // acc[4j + e]: y[m][n] with m the warp's x row g (+ 8 for e >= 2), n weight row 8j + 2t (+ 1
  // for odd e). for_each(f): f(m, n, float& v) for each of them inside [M, N].
  const int m_first = m0 + group * 64 + warp * 16 + lane / 4, n_first = n0 + 2 * (lane % 4);
  auto for_each = [&](auto&& f) {
#pragma unroll
    for (int j = 0; j < C::kRowsN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = m_first + (e >> 1) * 8, n = n_first + 8 * j + (e & 1);
        if (m < a.M && n < a.N) f(m, n, acc[4 * j + e]);
      }
  };
  finish_tile<false>(a, split, for_each);
}

template <typename C, typename T, typename W, typename Out>
void launch(const Args<T, Out>& args, cudaStream_t stream) {
  launch_tiles(byte_weight_wgmma_kernel<C, T, W, Out>, C::kThreads, C::kSmem, args, stream);
}

// The shapes (rows_m x rows_n): 64 x 128 fits two blocks an SM; 128 x 128 and 128 x 256 one.
using Rows64x128 = Config<1, 128, 4>;
using Rows128x128 = Config<2, 128, 5>;
using Rows128x256 = Config<2, 256, 4>;

// f(the Config of tile `shape`); false, f not called, when there is no such tile.
template <typename F>
bool with_shape(WgmmaShape shape, F&& f) {
  if (shape.rows_m == 64 && shape.rows_n == 128) return f(Rows64x128{}), true;
  if (shape.rows_m == 128 && shape.rows_n == 128) return f(Rows128x128{}), true;
  if (shape.rows_m == 128 && shape.rows_n == 256) return f(Rows128x256{}), true;
  return false;
}

[[noreturn]] void no_such_tile(WgmmaShape shape) {
  throw std::invalid_argument("byte-weight GEMM: no wgmma tile of " + std::to_string(shape.rows_m) +
                              " x " + std::to_string(shape.rows_n));
}

}  // namespace

bool wgmma_shape_exists(WgmmaShape shape) {
  return with_shape(shape, [](auto) {});
}

int wgmma_blocks_per_sm(WgmmaShape shape) {
  int blocks = 1;
  if (!with_shape(shape, [&](auto c) { blocks = (228 * 1024) / (decltype(c)::kSmem + 1024); }))
    no_such_tile(shape);
  return blocks < 1 ? 1 : blocks;
}

template <typename T, typename W, typename Out>
void launch_wgmma(const Args<T, Out>& args, WgmmaShape shape, cudaStream_t stream) {
  if (!with_shape(shape, [&](auto c) { launch<decltype(c), T, W, Out>(args, stream); }))
    no_such_tile(shape);
}

LMX_BYTE_GEMM_INSTANTIATE(launch_wgmma, WgmmaShape)

}  // namespace lmx::kernels::cuda::byte_gemm
