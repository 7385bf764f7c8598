// Hopper's tensor memory accelerator (TMA, sm_90) and the shared-memory barriers it signals, for
// GEMM kernels that keep a ring of operand stages in flight (w8a8_wgmma.cu):
//   - a producer thread waits until a slot is free (`wait(empty)`), announces the bytes it is
//     about to land (`arrive_expect_tx(full, bytes)`) and issues `load_2d` copies into the slot;
//   - the consumers `wait(full)` for the slot's phase, multiply, and `arrive(empty)`.
// A barrier's phases alternate 0, 1, 0, ...: the n-th completion of a barrier (from 0) ends phase
// n % 2, which `wait(bar, n % 2)` waits for.
// On the host, `byte_matrix_map` describes a row-major byte matrix to the TMA: boxes of box_rows x
// 128 bytes land in the 128-byte swizzle wgmma reads (wgmma.cuh), zeros past its rows and columns.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only; the encoder comes from the runtime)
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace lmx::kernels::cuda::tma {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The first 1024-byte-aligned byte of the dynamic shared memory `raw` (tiles in the 128-byte
// swizzle start 1024-aligned: the swizzle is computed from addresses). An offset from `raw`
// itself, not an integer cast back to a pointer: the compiler then still knows the result is
// shared memory (ld.shared with 32-bit addresses, not generic loads with 64-bit arithmetic).
__device__ __forceinline__ unsigned char* align_1024(unsigned char* raw) {
  return raw + ((1024u - (shared_address(raw) & 1023u)) & 1023u);
}

// `count` arrivals complete a phase of `bar` (plus, per phase, the bytes announced to it).
__device__ __forceinline__ void barrier_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count)
               : "memory");
}
// Makes the barriers' initialization visible to the TMA; a __syncthreads after it, to the block.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
}
// One arrival, and `bytes` more that this phase waits for (the copies issued against `bar`).
__device__ __forceinline__ void arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)),
      "r"(bytes)
      : "memory");
}
// Returns once the phase of `bar` with parity `parity` has completed.
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = shared_address(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}

// Copies the box at (column c0, row c1) of `map`'s matrix into shared `dst` (1024-byte aligned),
// its bytes counted against `bar`.
__device__ __forceinline__ void load_2d(void* dst, const CUtensorMap* map, int c0, int c1,
                                        uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(shared_address(bar))
      : "memory");
}

// The driver's cuTensorMapEncodeTiled, through the runtime (no link against libcuda).
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
inline EncodeTiled encode_tiled() {
  static const EncodeTiled encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<EncodeTiled>(fn);
  }();
  if (!encode) throw std::runtime_error("TMA: the driver has no cuTensorMapEncodeTiled");
  return encode;
}

// A row-major [rows, cols] byte matrix at `base` (16-byte aligned, cols % 16 == 0), read in boxes
// of box_rows (<= 256) rows x 128 bytes that land 128-byte swizzled; reads past the matrix fill
// zeros.
inline CUtensorMap byte_matrix_map(const void* base, int rows, int cols, int box_rows) {
  if ((reinterpret_cast<uintptr_t>(base) & 15u) != 0 || cols % 16 != 0 || rows <= 0 ||
      box_rows <= 0 || box_rows > 256)
    throw std::invalid_argument("TMA: a " + std::to_string(rows) + " x " + std::to_string(cols) +
                                " byte matrix needs 16-byte rows and base, boxes of 1-256 rows");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(cols)};
  const cuuint32_t box[2] = {128, cuuint32_t(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("TMA: cuTensorMapEncodeTiled failed (" + std::to_string(int(r)) +
                             ") for a " + std::to_string(rows) + " x " + std::to_string(cols) +
                             " byte matrix");
  return map;
}

}  // namespace lmx::kernels::cuda::tma
