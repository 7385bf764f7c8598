#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "kernels/gemm.h"

namespace lmx::kernels::cuda {
namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS ") + what + " failed: " + cublasGetStatusString(s));
}

template <typename T> constexpr cudaDataType_t cuda_type();
template <> constexpr cudaDataType_t cuda_type<float>() { return CUDA_R_32F; }
template <> constexpr cudaDataType_t cuda_type<__half>() { return CUDA_R_16F; }
template <> constexpr cudaDataType_t cuda_type<__nv_bfloat16>() { return CUDA_R_16BF; }

// Row-major y[M,N] = x[M,K] w[N,K]^T is column-major y^T[N,M] = w^T... : C(N x M) = op_T(W) * X.
template <typename T>
void gemm(GemmContext& ctx, const T* x, const T* w, void* y, cudaDataType_t y_type, int M, int N,
          int K, cudaStream_t stream) {
  if (M == 0 || N == 0) return;
  auto handle = static_cast<cublasHandle_t>(ctx.handle());
  check(cublasSetStream(handle, stream), "set stream");
  check(cublasSetWorkspace(handle, ctx.workspace(), ctx.workspace_bytes()), "set workspace");
  const float alpha = 1.0f, beta = 0.0f;
  check(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w, cuda_type<T>(), K, x,
                     cuda_type<T>(), K, &beta, y, y_type, N, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        "GemmEx");
}

}  // namespace

GemmContext::GemmContext(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "create");
  handle_ = h;
  if (cudaMalloc(&workspace_, workspace_bytes_) != cudaSuccess) {
    cublasDestroy(h);
    throw std::runtime_error("cannot allocate the cuBLAS workspace");
  }
  // fp32 GEMMs stay fp32 (no TF32): the fp32 path is the accuracy reference on the GPU.
  check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "set math mode");
}

GemmContext::~GemmContext() {
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

template <typename T>
void linear(GemmContext& ctx, const T* x, const T* w, T* y, int M, int N, int K,
            cudaStream_t stream) {
  gemm<T>(ctx, x, w, y, cuda_type<T>(), M, N, K, stream);
}

template <typename T>
void linear_f32_out(GemmContext& ctx, const T* x, const T* w, float* y, int M, int N, int K,
                    cudaStream_t stream) {
  gemm<T>(ctx, x, w, y, CUDA_R_32F, M, N, K, stream);
}

#define LMX_INSTANTIATE(T)                                                                     \
  template void linear<T>(GemmContext&, const T*, const T*, T*, int, int, int, cudaStream_t); \
  template void linear_f32_out<T>(GemmContext&, const T*, const T*, float*, int, int, int,    \
                                  cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
