#include "kernels/fp8_linear.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/cuda/bucket_tuned_gemm.cuh"

namespace lmx::kernels::cuda {
namespace {

template <typename T>
constexpr cudaDataType_t output_type() {
  if constexpr (std::is_same_v<T, __half>) return CUDA_R_16F;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return CUDA_R_16BF;
  return CUDA_R_32F;
}

void require_supported(int N, int K, const char* what) {
  if (!Fp8Gemm<float>::supported(N, K))
    throw std::invalid_argument(std::string(what) + ": N = " + std::to_string(N) + " and K = " +
                                std::to_string(K) + " must be positive multiples of 16");
}

}  // namespace

template <typename T>
Fp8Gemm<T>::Fp8Gemm(void* workspace, size_t workspace_bytes)
    : gemm_(std::make_unique<BucketTunedGemm>(
          "fp8 GEMM",
          LtTypes{CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, output_type<T>(),
                  /*outer_vec_scales=*/true},
          workspace, workspace_bytes)) {}

template <typename T>
Fp8Gemm<T>::~Fp8Gemm() = default;

template <typename T>
void Fp8Gemm<T>::run(const uint8_t* xq, const float* xs, const uint8_t* wq, const float* ws, T* y,
                     int M, int N, int K, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  require_supported(N, K, "fp8 GEMM");
  gemm_->run(xq, wq, y, M, N, K, ws, xs, stream);
}

template <typename T>
GemmTiming Fp8Gemm<T>::tune(const uint8_t* xq, const float* xs, const uint8_t* wq,
                            const float* ws, T* y, int M, int N, int K, cudaStream_t stream) {
  require_supported(N, K, "fp8 GEMM tuning");
  return gemm_->tune(xq, wq, y, M, N, K, ws, xs, stream);
}

template class Fp8Gemm<float>;
template class Fp8Gemm<__half>;
template class Fp8Gemm<__nv_bfloat16>;

}  // namespace lmx::kernels::cuda
