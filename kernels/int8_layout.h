// How the CUDA backend lays out int8 rows in memory (dynamic_int8's and smoothquant's weights,
// and smoothquant's per-token activations, which meet those weights in the int8 GEMMs): in each
// complete group of 16 columns of a row, the bytes in the order of the tensor cores' A-fragment
// slots, so that a thread's four weights of a 16-k step are one 4-byte word:
//   stored position 4t + j (t = 0..3, j = 0..3) holds column 2t + (j & 1) + 8 (j >> 1),
//   i.e. the column order 0 1 8 9 | 2 3 10 11 | 4 5 12 13 | 6 7 14 15.
// The last ld % 16 columns of a row of ld (a partial group) stay in column order. The W8A16
// wgmma GEMM (kernels/cuda/byte_weight_wgmma.cu) reads x from shared memory in column order and
// needs the weights this way; the kernels that feed the tensor cores x from registers (the decode
// GEMV, the mma.sync GEMM) widen a stored group back into column order in registers at no cost
// (kernels/cuda/byte_weights.cuh); an int8 x int8 GEMM (cuBLASLt, the W8A8
// wgmma kernel) sums over k in any order as long as both operands share it, which they do when
// both were written by quantize_rows_int8 (kernels/quantize.h) with the same row length.
// E4M3 codes stay in column order (the FP8 GEMM's weights: kernels/fp8_linear.h).
// Host code (the tests' uploads, the CPU reference's bytes to the device) and device code use the
// same function.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define LMX_INT8_LAYOUT_HD __host__ __device__ __forceinline__
#else
#define LMX_INT8_LAYOUT_HD inline
#endif

namespace lmx::kernels {

inline constexpr int kInt8LayoutGroup = 16;

// Where column k (0 <= k < ld) of a row of ld int8 values is stored.
LMX_INT8_LAYOUT_HD constexpr int int8_position(int k, int ld) {
  if (k >= ld - ld % kInt8LayoutGroup) return k;  // the partial group at the end, if any
  const int pair = (k % kInt8LayoutGroup) / 2;    // 0..7: columns 2 pair, 2 pair + 1
  return k - k % kInt8LayoutGroup + 4 * (pair % 4) + 2 * (pair / 4) + k % 2;
}

// rows x ld int8 values in column order (`from`) into the layout above (`to`; not in place).
inline void to_int8_layout(const int8_t* from, int8_t* to, size_t rows, int ld) {
  for (size_t r = 0; r < rows; ++r)
    for (int k = 0; k < ld; ++k) to[r * ld + int8_position(k, ld)] = from[r * ld + k];
}

// The inverse: stored rows back into column order.
inline void from_int8_layout(const int8_t* from, int8_t* to, size_t rows, int ld) {
  for (size_t r = 0; r < rows; ++r)
    for (int k = 0; k < ld; ++k) to[r * ld + k] = from[r * ld + int8_position(k, ld)];
}

}  // namespace lmx::kernels
