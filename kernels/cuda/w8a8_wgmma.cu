// smoothquant's W8A8 GEMM with its scales in the epilogue, on Hopper (kernels/w8a8.h):
//   y [M, N] T = T((float(xq · wq^T) * xs[m]) * ws[n]),  xq [M, K], wq [N, K] int8, K % 16 == 0
// the same values as Int8Gemm's int32 sums followed by w8a8_scale_epilogue, without the int32
// [M, N] round trip through memory between them.
//
// Persistent blocks, one an SM, each walking its share of the output tiles (kRowsM x kRowsN of y
// each, over K in stages of kStageK bytes), with three roles:
// - one producer thread (warp 8) keeps a ring of kStages slots filled through the TMA, its stage
//   counter running on across tiles: each stage's x rows and weight rows (128 bytes of k each)
//   land 128-byte swizzled, as wgmma reads them (tma.cuh); zeros past M, N and K;
// - two consumer warpgroups take the block's tiles in turn (ping-pong): the one whose turn it is
//   waits for each stage's `full` barrier, multiplies the stage with wgmma (2 x rows halves x 4
//   k-steps of 32, int32 sums in registers) and gives the slot back (`empty`) once its products
//   are done; after its last stage it hands the turn over and scales and stores its tile (two
//   fp32 products in the reference's order, one rounding to T) while the other multiplies the
//   next one. The tensor cores never wait for an epilogue, and the turns keep each warpgroup's
//   waits on the ring in stage order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/tile_order.cuh"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/wgmma.cuh"
#include "kernels/gpu_properties.h"
#include "kernels/w8a8.h"

namespace lmx::kernels::cuda {
namespace {

using detail::from_f;

constexpr int kRowsM = 128;     // x rows a tile: two wgmma of 64 rows
constexpr int kRowsN = 128;     // weight rows a tile: wgmma's N
constexpr int kStageK = 128;    // k a stage: one 128-byte swizzled row of each operand
constexpr int kStages = 6;      // slots in the ring
constexpr int kConsumers = 256;            // threads of the two consumer warpgroups
constexpr int kThreads = kConsumers + 32;  // and the producer's warp
constexpr int kXBytes = kRowsM * kStageK, kWBytes = kRowsN * kStageK;
constexpr int kSmem = kStages * (kXBytes + kWBytes) + 1024;  // + the 1024-byte alignment's slack
static_assert(kSmem <= 227 * 1024);

// One half (64 x rows) of a consumer thread's sums, scaled and stored: acc[4j + e] is the sum of
// x row m_first + 8 (e / 2) and weight row n_first + 8j + e % 2 (wgmma.cuh's accumulator layout).
template <typename T>
__device__ __forceinline__ void store_scaled(const int (&acc)[kRowsN / 2], int m_first,
                                             int n_first, const float* __restrict__ xs,
                                             const float* __restrict__ ws, T* __restrict__ y,
                                             int M, int N) {
  float row_scale[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = m_first + 8 * h;
    row_scale[h] = m < M ? xs[m] : 0.0f;
  }
  // Two neighbouring columns in one 4-byte store where every row starts 4-byte aligned.
  const bool pairs = N % 2 == 0 && (reinterpret_cast<uintptr_t>(y) & 3u) == 0;
#pragma unroll
  for (int j = 0; j < kRowsN / 8; ++j) {
    const int n = n_first + 8 * j;
    if (n >= N) break;
    const bool second = n + 1 < N;
    const float cs0 = ws[n], cs1 = second ? ws[n + 1] : 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m_first + 8 * h;
      if (m >= M) continue;
      const T v0 = from_f<T>(__fmul_rn(__fmul_rn(float(acc[4 * j + 2 * h]), row_scale[h]), cs0));
      const T v1 =
          from_f<T>(__fmul_rn(__fmul_rn(float(acc[4 * j + 2 * h + 1]), row_scale[h]), cs1));
      T* out = y + size_t(m) * N + n;
      if constexpr (sizeof(T) == 2) {
        if (pairs) {
          T both[2] = {v0, v1};
          *reinterpret_cast<uint32_t*>(out) = *reinterpret_cast<const uint32_t*>(both);
          continue;
        }
      }
      out[0] = v0;
      if (second) out[1] = v1;
    }
  }
}

// Named barriers (0 is __syncthreads') over both consumer warpgroups: warpgroup w waits on
// turn_barrier(w) before multiplying a tile; the other arrives on it when it hands the turn over.
__device__ __forceinline__ int turn_barrier(int group) { return 1 + group; }
__device__ __forceinline__ void wait_turn(int group) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(turn_barrier(group)), "n"(kConsumers) : "memory");
}
__device__ __forceinline__ void hand_over_turn(int group) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(turn_barrier(group ^ 1)), "n"(kConsumers)
               : "memory");
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    w8a8_wgmma_kernel(const __grid_constant__ CUtensorMap x_map,
                      const __grid_constant__ CUtensorMap w_map, const float* __restrict__ xs,
                      const float* __restrict__ ws, T* __restrict__ y, int M, int N, int K,
                      int tiles_m, int tiles_n) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full[kStages], empty[kStages];
  unsigned char* const x_slots = tma::align_1024(smem_raw);
  unsigned char* const w_slots = x_slots + kStages * kXBytes;
  const int stages = (K + kStageK - 1) / kStageK;
  // The block's tiles: blockIdx.x, + gridDim.x, ... (its i-th: tile blockIdx.x + i gridDim.x).
  const int tiles = tiles_m * tiles_n;
  const int my_tiles = tiles > int(blockIdx.x) ? (tiles - 1 - int(blockIdx.x)) / gridDim.x + 1 : 0;
  auto tile_origin = [&](int i, int& m0, int& n0) {
    int tile_m, tile_n;
    tile_of(int(blockIdx.x) + i * int(gridDim.x), tiles_m, tiles_n, tile_m, tile_n);
    m0 = tile_m * kRowsM, n0 = tile_n * kRowsN;
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      tma::barrier_init(&full[s], 1);   // the producer's arrival (+ the slot's bytes)
      tma::barrier_init(&empty[s], 1);  // the consumer warpgroup that multiplied the stage
    }
    tma::fence_barrier_init();
  }
  __syncthreads();

  if (threadIdx.x >= kConsumers) {  // the producer's warp: one thread issues every copy
    if (threadIdx.x == kConsumers) {
      for (int i = 0, g = 0; i < my_tiles; ++i) {  // g: stages issued so far, over every tile
        int m0, n0;
        tile_origin(i, m0, n0);
        for (int s = 0; s < stages; ++s, ++g) {
          const int slot = g % kStages;
          // The slot's previous stage (g - kStages) has been multiplied.
          if (g >= kStages) tma::wait(&empty[slot], (g / kStages - 1) & 1);
          tma::arrive_expect_tx(&full[slot], kXBytes + kWBytes);
          tma::load_2d(x_slots + slot * kXBytes, &x_map, s * kStageK, m0, &full[slot]);
          tma::load_2d(w_slots + slot * kWBytes, &w_map, s * kStageK, n0, &full[slot]);
        }
      }
    }
    return;
  }

  const int group = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  const bool leader = threadIdx.x % 128 == 0;  // releases the group's stages
  for (int i = group; i < my_tiles; i += 2) {
    int m0, n0;
    tile_origin(i, m0, n0);
    int acc[2][kRowsN / 2] = {};  // x rows 0-63 and 64-127 of the tile
    wgmma::fence_registers(acc[0]);
    wgmma::fence_registers(acc[1]);
    if (i > 0) wait_turn(group);  // the other group has waited for every stage before this tile
    for (int s = 0, g = i * stages; s < stages; ++s, ++g) {
      const int slot = g % kStages;
      tma::wait(&full[slot], (g / kStages) & 1);
      wgmma::fence();
      const uint64_t da = wgmma::sw128_desc(x_slots + slot * kXBytes);
      const uint64_t db = wgmma::sw128_desc(w_slots + slot * kWBytes);
#pragma unroll
      for (int k = 0; k < kStageK / 32; ++k) {  // + 2: 32 bytes (k) on; + 512: 64 rows on
        wgmma::wgmma_s8_k32<kRowsN>(acc[0], da + 2 * k, db + 2 * k);
        wgmma::wgmma_s8_k32<kRowsN>(acc[1], da + 512 + 2 * k, db + 2 * k);
      }
      wgmma::commit();
      wgmma::wait<1>();  // stage g - 1's products are done: its slot may be refilled
      if (s > 0 && leader) tma::arrive(&empty[(g - 1) % kStages]);
    }
    if (i + 1 < my_tiles) hand_over_turn(group);
    wgmma::wait<0>();
    wgmma::fence_registers(acc[0]);
    wgmma::fence_registers(acc[1]);
    if (leader) tma::arrive(&empty[((i + 1) * stages - 1) % kStages]);
    const int m_first = m0 + warp * 16 + lane / 4, n_first = n0 + 2 * (lane % 4);
    store_scaled<T>(acc[0], m_first, n_first, xs, ws, y, M, N);
    store_scaled<T>(acc[1], m_first + 64, n_first, xs, ws, y, M, N);
  }
}

}  // namespace

bool w8a8_wgmma_supported(int K) {
  return current_gpu().hopper() && K > 0 && K % 16 == 0;
}

template <typename T>
void w8a8_wgmma_gemm(const int8_t* xq, const int8_t* wq, const float* xs, const float* ws, T* y,
                     int M, int N, int K, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  if (!w8a8_wgmma_supported(K))
    throw std::invalid_argument(
        "W8A8 wgmma GEMM: needs a Hopper GPU and K % 16 == 0 (K = " + std::to_string(K) + ")");
  const CUtensorMap x_map = tma::byte_matrix_map(xq, M, K, kRowsM);
  const CUtensorMap w_map = tma::byte_matrix_map(wq, N, K, kRowsN);
  const int tiles_m = (M + kRowsM - 1) / kRowsM, tiles_n = (N + kRowsN - 1) / kRowsN;
  cudaFuncSetAttribute(w8a8_wgmma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  const int blocks = std::min(tiles_m * tiles_n, current_gpu().sms);  // persistent
  w8a8_wgmma_kernel<T><<<blocks, kThreads, kSmem, stream>>>(x_map, w_map, xs, ws, y, M, N, K,
                                                             tiles_m, tiles_n);
}

#define LMX_INSTANTIATE(T)                                                                       \
  template void w8a8_wgmma_gemm<T>(const int8_t*, const int8_t*, const float*, const float*, T*, \
                                   int, int, int, cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
