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
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "kernels/gemm.h"
#include "kernels/stream.h"

namespace lmx::kernels::cuda {

class BucketTunedGemm;  // kernels/cuda/bucket_tuned_gemm.cuh

// The row length of a W8A8 projection's int8 codes (weights and activations) for K input columns:
// K rounded up to 4, the int8 GEMM's K (zero codes add nothing; a rank's slice of a small model,
// stories260k's 172 / 2 = 86, is not a multiple of 4).
constexpr int w8a8_padded(int K) { return (K + 3) / 4 * 4; }

template <typename T>
void w8a8_scale_epilogue(const int32_t* acc, const float* row_scale, const float* col_scale,
                         T* y, int M, int N, cudaStream_t stream);

// The int8 x int8 -> int32 GEMM (cuBLASLt IMMA), its algorithm chosen by timing per row bucket
// (kernels/cuda/bucket_tuned_gemm.cuh). Operands: xq [M, K], wq [N, K], acc [M, N] row-major, each
// 256-byte aligned (as cudaMalloc gives), K % 4 == 0.
class Int8Gemm {
 public:
  // `workspace` (device, `workspace_bytes`) may be shared with other GEMMs of the same stream.
  Int8Gemm(void* workspace, size_t workspace_bytes);
  ~Int8Gemm();
  Int8Gemm(const Int8Gemm&) = delete;
  Int8Gemm& operator=(const Int8Gemm&) = delete;

  void run(const int8_t* xq, const int8_t* wq, int32_t* acc, int M, int N, int K,
           cudaStream_t stream);

  // Times the candidates for (bucket(M), N, K) now, on xq / wq / acc (overwritten), and keeps the
  // fastest. Synchronizes `stream`: not during graph capture.
  GemmTiming tune(const int8_t* xq, const int8_t* wq, int32_t* acc, int M, int N, int K,
                  cudaStream_t stream);

  static bool supported(int K) { return K > 0 && K % 4 == 0; }

 private:
  std::unique_ptr<BucketTunedGemm> gemm_;
};

// Steps 2 and 3 in one kernel on Hopper (kernels/cuda/w8a8_wgmma.cu): y [M, N] T = the values
// Int8Gemm's sums through w8a8_scale_epilogue give, bit for bit, without the int32 [M, N] pass
// through memory between them. xq [M, K], wq [N, K] 16-byte aligned; w8a8_wgmma_supported(K):
// a compute capability 9.x device and K % 16 == 0 (else invalid_argument).
bool w8a8_wgmma_supported(int K);
template <typename T>
void w8a8_wgmma_gemm(const int8_t* xq, const int8_t* wq, const float* xs, const float* ws, T* y,
                     int M, int N, int K, cudaStream_t stream);

// Steps 2 and 3 as one call, y [M, N] T from the codes and their scales: through the fused kernel
// or through Int8Gemm and the epilogue (int32 sums in `acc` [M, N]), the same bytes either way,
// whichever ran faster for (row bucket of M, N, K) when timed on the first such call outside graph
// capture (Int8Gemm's own tuning first); the two steps where the fused kernel cannot run, below
// its tile's kW8A8WgmmaMinRows x rows (a decode batch would fill a fraction of each tile and
// leave the choice to a timing of weight-bound calls), and during a capture before that timing.
inline constexpr int kW8A8WgmmaMinRows = 128;
template <typename T>
class W8A8Gemm {
 public:
  W8A8Gemm(void* workspace, size_t workspace_bytes);
  void run(const int8_t* xq, const int8_t* wq, const float* xs, const float* ws, int32_t* acc, T* y,
           int M, int N, int K, cudaStream_t stream);
  // The timed choice for M rows of N x K: true fused, false the two steps, empty not timed yet.
  std::optional<bool> fused(int M, int N, int K) const;

 private:
  void two_steps(const int8_t* xq, const int8_t* wq, const float* xs, const float* ws, int32_t* acc,
                 T* y, int M, int N, int K, cudaStream_t stream);
  Int8Gemm int8_;
  std::map<std::tuple<int, int, int>, bool> fused_;  // (row bucket, N, K): timed
};

}  // namespace lmx::kernels::cuda
