#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/cuda/call_timing.cuh"
#include "kernels/cuda/lt_plan.cuh"
#include "kernels/gemm.h"

namespace lmx::kernels::cuda {

// The cuBLASLt plans tune_linear kept, by shape: descriptors made once, reused by every call.
struct GemmContext::Tuned {
  struct Plan {
    LtPlan shape;  // the TN descriptors (kernels/cuda/lt_plan.cuh)
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int, int, int, int, int>;  // M, N, K, input type, output type
  cublasLtHandle_t lt = nullptr;
  std::map<Key, Plan> plans;

  ~Tuned() {
    plans.clear();  // their descriptors before the handle
    if (lt) cublasLtDestroy(lt);
  }
  const Plan* find(const Key& key) const {
    const auto it = plans.find(key);
    return it == plans.end() ? nullptr : &it->second;
  }
  // y = x · w^T through `shape`'s descriptors with `algo` (gemm's product, see there).
  cublasStatus_t run(const LtPlan& shape, const cublasLtMatmulAlgo_t& algo, const void* x,
                     const void* w, void* y, const GemmContext& ctx, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(lt, shape.op, &alpha, w, shape.w, x, shape.x, &beta, y, shape.y, y,
                          shape.y, &algo, ctx.workspace(), ctx.workspace_bytes(), stream);
  }
};

namespace {

// linear and linear_f32_out add no bias (fused elementwise ops do): refuse one, never drop it.
// ... and take weights in T: int8 and fp8 ones are refused, never read as T.
template <typename T>
void require_no_bias(const LinearWeights<T>& w, const char* launcher) {
  if (w.bias)
    throw std::invalid_argument(std::string(launcher) +
                                ": adds no bias (pass w.without_bias() and add it in a fused op)");
  if (w.quantized())
    throw std::invalid_argument(std::string(launcher) +
                                ": takes weights in T (dequantize int8 ones first: kernels/quantize.h; "
                                "fp8 ones run Fp8Gemm: kernels/fp8_linear.h)");
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS ") + what +
                             " failed: " + cublasGetStatusString(s));
}

template <typename T>
constexpr cudaDataType_t cuda_type();
template <>
constexpr cudaDataType_t cuda_type<float>() {
  return CUDA_R_32F;
}
template <>
constexpr cudaDataType_t cuda_type<__half>() {
  return CUDA_R_16F;
}
template <>
constexpr cudaDataType_t cuda_type<__nv_bfloat16>() {
  return CUDA_R_16BF;
}

// Row-major y[M,N] = x[M,K] w[N,K]^T is column-major y^T[N,M] = w^T... : C(N x M) = op_T(W) * X.
// A tuned shape runs its cuBLASLt plan; the others cuBLAS's default algorithm.
template <typename T>
void gemm(GemmContext& ctx, const T* x, const T* w, void* y, cudaDataType_t y_type, int M, int N,
          int K, cudaStream_t stream) {
  if (M == 0 || N == 0) return;
  const GemmContext::Tuned& tuned = ctx.tuned();
  // The heuristic proposed algorithms for 256-byte aligned operands (its default assumption).
  const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) |
                         reinterpret_cast<uintptr_t>(y)) &
                        255u) == 0;
  const auto* p = aligned ? tuned.find({M, N, K, int(cuda_type<T>()), int(y_type)}) : nullptr;
  if (p) {
    check(tuned.run(p->shape, p->algo, x, w, y, ctx, stream), "LtMatmul");
    return;
  }
  const float alpha = 1.0f, beta = 0.0f;
  auto handle = static_cast<cublasHandle_t>(ctx.handle());
  check(cublasSetStream(handle, stream), "set stream");
  check(cublasSetWorkspace(handle, ctx.workspace(), ctx.workspace_bytes()), "set workspace");
  check(
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, w, cuda_type<T>(), K, x,
                   cuda_type<T>(), K, &beta, y, y_type, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "GemmEx");
}

}  // namespace

GemmContext::GemmContext(size_t workspace_bytes)
    : workspace_bytes_(workspace_bytes), tuned_(std::make_unique<Tuned>()) {
  check(cublasLtCreate(&tuned_->lt), "Lt create");
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
void linear(GemmContext& ctx, const T* x, const LinearWeights<T>& w, T* y, int M,
            cudaStream_t stream) {
  require_no_bias(w, "linear");
  gemm<T>(ctx, x, w.weight, y, cuda_type<T>(), M, w.out, w.in, stream);
}

template <typename T>
void linear_f32_out(GemmContext& ctx, const T* x, const LinearWeights<T>& w, float* y, int M,
                    cudaStream_t stream) {
  require_no_bias(w, "linear_f32_out");
  gemm<T>(ctx, x, w.weight, y, CUDA_R_32F, M, w.out, w.in, stream);
}


template <typename T, typename Out>
LinearTuning tune_linear(GemmContext& ctx, const T* const* weights, int count, const T* x, Out* y,
                         int M, int N, int K, cudaStream_t stream, double min_gain) {
  if (count < 1 || M < 1 || N < 1 || K < 1)
    throw std::invalid_argument("tune_linear: needs weights and a non-empty shape");
  constexpr cudaDataType_t in = cuda_type<T>(), out = cuda_type<Out>();
  GemmContext::Tuned& tuned = ctx.tuned();
  const GemmContext::Tuned::Key key{M, N, K, int(in), int(out)};
  tuned.plans.erase(key);  // re-tune from the default
  LinearTuning result;
  const int rounds = std::max(1, 48 / count);  // >= 48 calls (o_proj: ~0.7 ms)
  result.default_us = detail::mean_call_us(
      [&](int i) {
        gemm<T>(ctx, x, weights[i], y, out, M, N, K, stream);
        return true;
      },
      count, rounds, stream);
  result.best_us = result.default_us;

  // The same product as gemm's, in fp32 arithmetic (no TF32: see GemmContext).
  LtPlan shape(LtTypes{CUBLAS_COMPUTE_32F, CUDA_R_32F, in, in, out}, M, N, K);
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t found[kCandidates];
  const int n = shape.propose(tuned.lt, ctx.workspace_bytes(), found, kCandidates);
  int best = -1;
  for (int c = 0; c < n; ++c) {
    const double us = detail::mean_call_us(
        [&](int i) {
          return tuned.run(shape, found[c].algo, x, weights[i], y, ctx, stream) ==
                 CUBLAS_STATUS_SUCCESS;
        },
        count, rounds, stream);
    ++result.candidates;
    if (us > 0 && us < (best < 0 ? (1.0 - min_gain) * result.default_us : result.best_us))
      result.best_us = us, best = c;
  }
  if (best < 0) return result;
  tuned.plans.emplace(key, GemmContext::Tuned::Plan{std::move(shape), found[best].algo});
  result.lt = true;
  return result;
}

#define LMX_INSTANTIATE_TUNE(T, Out)                                                            \
  template LinearTuning tune_linear<T, Out>(GemmContext&, const T* const*, int, const T*, Out*, \
                                            int, int, int, cudaStream_t, double);
LMX_INSTANTIATE_TUNE(float, float)
LMX_INSTANTIATE_TUNE(__half, __half)
LMX_INSTANTIATE_TUNE(__half, float)
LMX_INSTANTIATE_TUNE(__nv_bfloat16, __nv_bfloat16)
LMX_INSTANTIATE_TUNE(__nv_bfloat16, float)
#undef LMX_INSTANTIATE_TUNE

#define LMX_INSTANTIATE(T)                                                                         \
  template void linear<T>(GemmContext&, const T*, const LinearWeights<T>&, T*, int, cudaStream_t); \
  template void linear_f32_out<T>(GemmContext&, const T*, const LinearWeights<T>&, float*, int,    \
                                  cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
