// Linear layer: y[M, N] = x[M, K] · w[N, K]^T (+ bias[N]), w in nn.Linear's [out, in] layout.
// CPU: fp32, host memory, through BLAS (OpenBLAS's multi-threaded sgemm).
// CUDA: T = __half or __nv_bfloat16 (or float) in device memory through cuBLAS with fp32
// accumulation; the output is T, or fp32 with linear_f32_out (the LM head's logits). Bias is added
// by the fused elementwise ops, not here. The cuBLAS handle and its workspace live in a
// GemmContext made once at load, so a launch allocates nothing and can be graph-captured.
#pragma once

#include <cstddef>

#include "kernels/stream.h"

namespace lmx::kernels::cpu {

void linear(const float* x, const float* w, const float* bias, float* y, int M, int N, int K);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

class GemmContext {
 public:
  explicit GemmContext(size_t workspace_bytes = 32u << 20);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  void* handle() const { return handle_; }  // cublasHandle_t
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

template <typename T>
void linear(GemmContext& ctx, const T* x, const T* w, T* y, int M, int N, int K,
            cudaStream_t stream);

template <typename T>
void linear_f32_out(GemmContext& ctx, const T* x, const T* w, float* y, int M, int N, int K,
                    cudaStream_t stream);

// Decode-shaped linear (M <= kSkinnyMaxRows rows; T = __half or __nv_bfloat16; K % 8 == 0,
// 16-byte aligned x and w; any N): a weight-streaming kernel that keeps the memory system busy
// where a general GEMM leaves bandwidth unused. Same math as linear (fp32 accumulation, k summed
// in a different order). One launch, no allocation, no synchronization: graph-capturable (the
// first call in a process queries the SM count and occupancy once and caches them). 8 rows is
// the tensor-core tile's width, not a tuning choice. Design: kernels/cuda/gemv.cu; speed against
// cuBLAS: bench/kernels/gemv_bench.cu.
constexpr int kSkinnyMaxRows = 8;
bool skinny_supported(int M, int K);
template <typename T>
void skinny_linear(const T* x, const T* w, T* y, int M, int N, int K, cudaStream_t stream);
template <typename T>
void skinny_linear_f32_out(const T* x, const T* w, float* y, int M, int N, int K,
                           cudaStream_t stream);

}  // namespace lmx::kernels::cuda
