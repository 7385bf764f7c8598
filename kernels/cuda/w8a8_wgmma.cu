// smoothquant's W8A8 GEMM with its scales in the epilogue, on Hopper (kernels/w8a8.h):
//   y [M, N] T = T((float(xq · wq^T) * xs[m]) * ws[n]),  xq [M, K], wq [N, K] int8, K % 16 == 0
// the same values as Int8Gemm's int32 sums followed by w8a8_scale_epilogue, without the int32
// [M, N] round trip through memory between them.
//
// A block computes a kRowsM x kRowsN tile of y, over K in stages of kStageK bytes:
// - one producer thread (warp 8) keeps a ring of kStages slots filled through the TMA: each
//   stage's x rows (kRowsM x 128 bytes) and weight rows (kRowsN x 128 bytes) land 128-byte
//   swizzled, as wgmma reads them (tma.cuh); zeros past M, N and K;
// - two consumer warpgroups (warps 0-7) wait for a slot's `full` barrier, multiply their 64 x rows
//   by the slot's kRowsN weight rows with 4 wgmma of k 32 (int32 sums in registers), and once the
//   products of a stage are done give its slot back (`empty`, one arrival a warpgroup);
// - then each consumer thread scales its sums (two fp32 products in the reference's order, one
//   rounding to T) and stores them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/tile_order.cuh"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/wgmma.cuh"
#include "kernels/w8a8.h"

namespace lmx::kernels::cuda {
namespace {

using detail::from_f;

constexpr int kRowsM = 128;                // x rows a block: two consumer warpgroups of 64
constexpr int kRowsN = 256;                // weight rows a block: wgmma's N
constexpr int kStageK = 128;               // k a stage: one 128-byte swizzled row of each operand
constexpr int kStages = 4;                 // slots in the ring
constexpr int kConsumers = 256;            // threads of the two consumer warpgroups
constexpr int kThreads = kConsumers + 32;  // and the producer's warp
constexpr int kXBytes = kRowsM * kStageK, kWBytes = kRowsN * kStageK;
constexpr int kSmem = kStages * (kXBytes + kWBytes) + 1024;  // + the 1024-byte alignment's slack
static_assert(kSmem <= 227 * 1024);

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    w8a8_wgmma_kernel(const __grid_constant__ CUtensorMap x_map,
                      const __grid_constant__ CUtensorMap w_map, const float* __restrict__ xs,
                      const float* __restrict__ ws, T* __restrict__ y, int M, int N, int K,
                      int tiles_m, int tiles_n) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full[kStages], empty[kStages];
  unsigned char* const x_slots = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* const w_slots = x_slots + kStages * kXBytes;
  int tile_m, tile_n;
  tile_of(blockIdx.x, tiles_m, tiles_n, tile_m, tile_n);
  const int m0 = tile_m * kRowsM, n0 = tile_n * kRowsN;
  const int stages = (K + kStageK - 1) / kStageK;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      tma::barrier_init(&full[s], 1);   // the producer's arrival (+ the slot's bytes)
      tma::barrier_init(&empty[s], 2);  // one arrival a consumer warpgroup
    }
    tma::fence_barrier_init();
  }
  __syncthreads();

  if (threadIdx.x >= kConsumers) {  // the producer's warp: one thread issues every copy
    if (threadIdx.x == kConsumers) {
      for (int s = 0; s < stages; ++s) {
        const int slot = s % kStages;
        // The slot's previous stage (s - kStages) has been multiplied by both warpgroups.
        if (s >= kStages) tma::wait(&empty[slot], (s / kStages - 1) & 1);
        tma::arrive_expect_tx(&full[slot], kXBytes + kWBytes);
        tma::load_2d(x_slots + slot * kXBytes, &x_map, s * kStageK, m0, &full[slot]);
        tma::load_2d(w_slots + slot * kWBytes, &w_map, s * kStageK, n0, &full[slot]);
      }
    }
    return;
  }

  const int group = threadIdx.x / 128, warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;
  int acc[kRowsN / 2] = {};
  wgmma::fence_registers(acc);
  for (int s = 0; s < stages; ++s) {
    const int slot = s % kStages;
    tma::wait(&full[slot], (s / kStages) & 1);
    wgmma::fence();
    const uint64_t da = wgmma::sw128_desc(x_slots + slot * kXBytes + group * 64 * kStageK);
    const uint64_t db = wgmma::sw128_desc(w_slots + slot * kWBytes);
#pragma unroll
    for (int k = 0; k < kStageK / 32; ++k)
      wgmma::wgmma_s8_k32_n256(acc, da + 2 * k, db + 2 * k);  // + 32 bytes: 32 k on
    wgmma::commit();
    wgmma::wait<1>();  // stage s - 1's products are done: its slot may be refilled
    if (s > 0 && threadIdx.x % 128 == 0) tma::arrive(&empty[(s - 1) % kStages]);
  }
  wgmma::wait<0>();
  wgmma::fence_registers(acc);

  // acc[4j + e]: the sum of x row m_first + 8 (e / 2) and weight row n_first + 8j + e % 2
  // (wgmma.cuh's accumulator layout).
  const int m_first = m0 + group * 64 + warp * 16 + lane / 4, n_first = n0 + 2 * (lane % 4);
  float row_scale[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = m_first + 8 * h;
    row_scale[h] = m < M ? xs[m] : 0.0f;
  }
  const bool pairs = N % 2 == 0;  // two neighbouring columns in one store
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

bool hopper_device() {
  int dev = 0, major = 0;
  return cudaGetDevice(&dev) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
         major == 9;
}

}  // namespace

bool w8a8_wgmma_supported(int K) {
  static const bool hopper = hopper_device();
  return hopper && K > 0 && K % 16 == 0;
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
  w8a8_wgmma_kernel<T><<<tiles_m * tiles_n, kThreads, kSmem, stream>>>(x_map, w_map, xs, ws, y, M,
                                                                       N, K, tiles_m, tiles_n);
}

#define LMX_INSTANTIATE(T)                                                                       \
  template void w8a8_wgmma_gemm<T>(const int8_t*, const int8_t*, const float*, const float*, T*, \
                                   int, int, int, cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
