// SmoothQuant's W8A8 linear on the GPU, the three steps of quant/w8a8.h (the CPU reference, same
// math) for one projection whose weight is int8 per output channel (wq [N, K], ws [N] fp32):
//   1. per-token int8 activations: quantize_rows_int8 (kernels/quantize.h) of x [M, K] T, with
//      col_scale = 1/s where the smoothing could not be folded into a norm
//        -> xq [M, K] int8, xs [M] fp32
//   2. acc [M, N] int32 = xq · wq^T on the int8 tensor cores: Int8Gemm (cuBLASLt IMMA; exact
//      integer sums, K <= quant::kW8A8MaxIn)
//   3. y [M, N] T = T(float(acc) * xs[m] * ws[n]): w8a8_scale_epilogue (two fp32 products in the
//      reference's order, one rounding to T; the bias is added by the layer program, as for every
//      projection)
// Device memory, T = float, __half or __nv_bfloat16; no allocation in a launch once a shape has its
// plan; graph-capturable (a shape first seen during capture gets cuBLASLt's heuristic choice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/stream.h"

namespace lmx::kernels::cuda {

template <typename T>
void w8a8_scale_epilogue(const int32_t* acc, const float* row_scale, const float* col_scale,
                         T* y, int M, int N, cudaStream_t stream);

// The int8 x int8 -> int32 GEMM. Hopper has no good default among cuBLASLt's int8 algorithms (a
// single heuristic pick ran at ~1.0x the fp16 rate, the fastest of those proposed at 1.4-2.2x:
// ../shared/notes/hopper-gemm.md), so the first call of a shape outside graph capture times every
// algorithm the heuristic proposes and keeps the fastest. Shapes share a choice by row bucket
// (M rounded up to a power of two), so prefill chunks of every length do not each pay the timing.
// Operands: xq [M, K], wq [N, K], acc [M, N] row-major, each 256-byte aligned (as cudaMalloc gives:
// the alignment cuBLASLt's proposals assume), K % 4 == 0.
class Int8Gemm {
 public:
  // `workspace` (device, `workspace_bytes`) may be shared with other GEMMs of the same stream.
  Int8Gemm(void* workspace, size_t workspace_bytes);
  ~Int8Gemm();
  Int8Gemm(const Int8Gemm&) = delete;
  Int8Gemm& operator=(const Int8Gemm&) = delete;

  void run(const int8_t* xq, const int8_t* wq, int32_t* acc, int M, int N, int K,
           cudaStream_t stream);

  // What the timing of one row bucket found (the fastest is then used by run).
  struct Tuning {
    double heuristic_us = 0, best_us = 0;  // a call: cuBLASLt's first proposal, the one kept
    int candidates = 0;
  };
  // Times the candidates for (bucket(M), N, K) now, on xq / wq / acc (overwritten), and keeps the
  // fastest. Synchronizes `stream`: not during graph capture.
  Tuning tune(const int8_t* xq, const int8_t* wq, int32_t* acc, int M, int N, int K,
              cudaStream_t stream);

  static bool supported(int K) { return K > 0 && K % 4 == 0; }

 private:
  struct Plans;
  std::unique_ptr<Plans> plans_;
};

}  // namespace lmx::kernels::cuda
