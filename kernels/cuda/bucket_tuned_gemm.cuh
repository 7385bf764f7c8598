// A cuBLASLt GEMM (kernels/cuda/lt_plan.cuh's TN shape) whose algorithm is chosen by timing: the
// int8 and fp8 tensor-core GEMMs of the W8A8 linears (kernels/w8a8.h, kernels/fp8_linear.h).
// Hopper has no good default among cuBLASLt's int8 algorithms (a single heuristic pick ran at
// ~1.0x the fp16 rate, the fastest of those proposed at 1.4-2.2x: ../shared/notes/hopper-gemm.md),
// so the first call of a shape outside graph capture times every algorithm the heuristic proposes
// and keeps the fastest. Shapes share a choice by row bucket (M rounded up to a power of two, at
// least 16), so prefill chunks of every length do not each pay the timing. A shape first seen
// during capture gets the bucket's choice if there is one, else cuBLASLt's first proposal.
// Operands 256-byte aligned (as cudaMalloc gives: the alignment cuBLASLt's proposals assume).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "kernels/cuda/lt_plan.cuh"
#include "kernels/gemm.h"  // GemmTiming

namespace lmx::kernels::cuda {

// The row bucket a GEMM's timed choice is kept for: M rounded up to a power of two, at least 16.
int gemm_row_bucket(int M);
// Whether `stream` is being captured into a graph (no timing then); `what` names the GEMM in the
// error thrown when the status cannot be read.
bool stream_capturing(cudaStream_t stream, const char* what);

class BucketTunedGemm {
 public:
  // `what` names the GEMM in errors ("int8 GEMM"); `workspace` may be shared with other GEMMs of
  // the same stream.
  BucketTunedGemm(const char* what, const LtTypes& types, void* workspace, size_t workspace_bytes);
  ~BucketTunedGemm();
  BucketTunedGemm(const BucketTunedGemm&) = delete;
  BucketTunedGemm& operator=(const BucketTunedGemm&) = delete;

  // y [M, N] = x [M, K] · w [N, K]^T (scaled by ws [N] and xs [M] when the types have outer-vector
  // scales; null otherwise).
  void run(const void* x, const void* w, void* y, int M, int N, int K, const float* ws,
           const float* xs, cudaStream_t stream);
  // Times the candidates for (bucket(M), N, K) now on these operands (y overwritten) and keeps the
  // fastest. Synchronizes `stream`: not during graph capture.
  GemmTiming tune(const void* x, const void* w, void* y, int M, int N, int K, const float* ws,
                  const float* xs, cudaStream_t stream);

 private:
  struct Shape {
    LtPlan plan;
    bool has_algo = false;  // `algo` is the bucket's timed choice, checked for this shape
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int, int, int>;
  Shape& shape(int M, int N, int K);
  cublasStatus_t matmul(const Shape& s, const cublasLtMatmulAlgo_t& algo, const void* x,
                        const void* w, void* y, const float* ws, const float* xs,
                        cudaStream_t stream) const;
  [[noreturn]] void no_algorithm(int M, int N, int K) const;

  const char* what_;
  LtTypes types_;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<Key, Shape> shapes_;                   // (M, N, K)
  std::map<Key, cublasLtMatmulAlgo_t> choices_;  // (row bucket, N, K): timed
};

}  // namespace lmx::kernels::cuda
