// option.quantize=fp8's linear on the GPU, quant/fp8.h's math (the CPU reference) for one
// projection whose weight is E4M3 per output channel (wq [N, K] codes, ws [N] fp32):
//   1. per-token E4M3 activations: quantize_rows_e4m3 (kernels/quantize.h) of x [M, K] T
//        -> xq [M, Kp] E4M3, xs [M] fp32 (bit for bit the reference's; Kp = fp8_padded(K): the
//        GEMM takes K in multiples of 16, so codes past K are zeros in xq and wq [N, Kp] alike)
//   2. y [M, N] T = T((ws[n] * xs[m]) * sum_k e4m3(xq[m, k]) e4m3(wq[n, k])): Fp8Gemm, on the FP8
//      tensor cores (cuBLASLt with outer-vector scales: both scales applied in the GEMM's own
//      epilogue, no int32/fp32 pass over y as int8 needs). Each product is exact; the sums run
//      in another order than the reference's (and through Hopper's FP8 accumulator, which
//      cuBLASLt promotes to fp32 at intervals), so y equals the reference within the sums'
//      rounding, not bit for bit.
// Decode-sized steps take the weight-streaming GEMV instead (kernels/gemm.h, E4M3 weights with
// 16-bit activations, LinearWeights::e4m3). Device memory; graph-capturable once a row bucket has
// its algorithm (kernels/cuda/bucket_tuned_gemm.cuh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/gemm.h"
#include "kernels/stream.h"

namespace lmx::kernels::cuda {

class BucketTunedGemm;  // kernels/cuda/bucket_tuned_gemm.cuh

// The row length of a projection's E4M3 codes (weights and activations) for K input columns:
// K rounded up to 16, the zero columns adding nothing to the sums.
constexpr int fp8_padded(int K) { return (K + 15) / 16 * 16; }

// T = __half, __nv_bfloat16 or float (the output type; fp32 accumulation in every case).
// Operands row-major, each 256-byte aligned (as cudaMalloc gives); N and K multiples of 16
// (cuBLASLt offers no FP8 algorithm otherwise: pad with fp8_padded).
template <typename T>
class Fp8Gemm {
 public:
  // `workspace` (device, `workspace_bytes`) may be shared with other GEMMs of the same stream.
  Fp8Gemm(void* workspace, size_t workspace_bytes);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // y [M, N] = (ws[n] * xs[m]) * (xq [M, K] · wq [N, K]^T)
  void run(const uint8_t* xq, const float* xs, const uint8_t* wq, const float* ws, T* y, int M,
           int N, int K, cudaStream_t stream);
  // Times the candidates for (bucket(M), N, K) now (y overwritten) and keeps the fastest.
  // Synchronizes `stream`: not during graph capture.
  GemmTiming tune(const uint8_t* xq, const float* xs, const uint8_t* wq, const float* ws, T* y,
                  int M, int N, int K, cudaStream_t stream);

  static bool supported(int N, int K) { return N > 0 && K > 0 && N % 16 == 0 && K % 16 == 0; }

 private:
  std::unique_ptr<BucketTunedGemm> gemm_;
};

}  // namespace lmx::kernels::cuda
