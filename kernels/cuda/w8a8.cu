#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "kernels/cuda/call_timing.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/w8a8.h"

namespace lmx::kernels::cuda {
namespace {

using detail::from_f;

constexpr int kThreads = 256;

// y = T((float(acc) * row_scale[m]) * col_scale[n]): the reference's two products, each rounded
// to fp32 (no fused multiply-add), then one rounding to T. Four columns a thread when N allows
// 16-byte loads, else one.
template <typename T, int V>
__global__ void scale_epilogue_kernel(const int32_t* __restrict__ acc,
                                      const float* __restrict__ row_scale,
                                      const float* __restrict__ col_scale, T* __restrict__ y,
                                      size_t groups, int N) {
  const int per_row = N / V;
  for (size_t g = blockIdx.x * size_t(blockDim.x) + threadIdx.x; g < groups;
       g += size_t(gridDim.x) * blockDim.x) {
    const size_t m = g / per_row;
    const int n0 = int(g % per_row) * V;
    const size_t i = m * N + n0;
    const float rs = row_scale[m];
    int32_t a[V];
    if constexpr (V == 4) {
      const int4 v = *reinterpret_cast<const int4*>(acc + i);
      a[0] = v.x, a[1] = v.y, a[2] = v.z, a[3] = v.w;
    } else {
      a[0] = acc[i];
    }
#pragma unroll
    for (int j = 0; j < V; ++j)
      y[i + j] = from_f<T>(__fmul_rn(__fmul_rn(float(a[j]), rs), col_scale[n0 + j]));
  }
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt int8 GEMM: ") + what +
                             " failed: " + cublasGetStatusString(s));
}

int row_bucket(int M) {
  int b = 16;
  while (b < M) b *= 2;
  return b;
}

}  // namespace

template <typename T>
void w8a8_scale_epilogue(const int32_t* acc, const float* row_scale, const float* col_scale,
                         T* y, int M, int N, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  const bool vec = N % 4 == 0 && (reinterpret_cast<uintptr_t>(acc) & 15u) == 0;
  const size_t groups = size_t(M) * (vec ? N / 4 : N);
  const int blocks = int(std::min<size_t>((groups + kThreads - 1) / kThreads, 132 * 16));
  if (vec)
    scale_epilogue_kernel<T, 4><<<blocks, kThreads, 0, stream>>>(acc, row_scale, col_scale, y,
                                                                 groups, N);
  else
    scale_epilogue_kernel<T, 1><<<blocks, kThreads, 0, stream>>>(acc, row_scale, col_scale, y,
                                                                 groups, N);
}

// Row-major acc[M, N] = xq[M, K] wq[N, K]^T is column-major acc^T (N x M) = op_T(wq) · xq, the
// TN layout Hopper's IMMA kernels take (no COL32 layouts since Hopper).
struct Int8Gemm::Plans {
  struct Shape {  // the descriptors of one exact (M, N, K)
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
    bool has_algo = false;  // `algo` is the bucket's timed choice, checked for this shape
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int, int, int>;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<Key, Shape> shapes;                    // (M, N, K)
  std::map<Key, cublasLtMatmulAlgo_t> choices;    // (row bucket, N, K): timed

  ~Plans() {
    for (auto& [key, s] : shapes) {
      if (s.op) cublasLtMatmulDescDestroy(s.op);
      if (s.w) cublasLtMatrixLayoutDestroy(s.w);
      if (s.x) cublasLtMatrixLayoutDestroy(s.x);
      if (s.y) cublasLtMatrixLayoutDestroy(s.y);
    }
    if (lt) cublasLtDestroy(lt);
  }

  Shape& shape(int M, int N, int K) {
    auto [it, fresh] = shapes.try_emplace({M, N, K});
    Shape& s = it->second;
    if (!fresh) return s;
    const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
    check(cublasLtMatmulDescCreate(&s.op, CUBLAS_COMPUTE_32I, CUDA_R_32I), "descriptor");
    check(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                         sizeof transpose),
          "transa");
    check(cublasLtMatmulDescSetAttribute(s.op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none),
          "transb");
    check(cublasLtMatrixLayoutCreate(&s.w, CUDA_R_8I, K, N, K), "layout");
    check(cublasLtMatrixLayoutCreate(&s.x, CUDA_R_8I, K, M, K), "layout");
    check(cublasLtMatrixLayoutCreate(&s.y, CUDA_R_32I, N, M, N), "layout");
    return s;
  }

  // Up to `max` algorithms cuBLASLt proposes for the shape, best guess first.
  int propose(const Shape& s, cublasLtMatmulHeuristicResult_t* found, int max) const {
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "preference");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace_bytes, sizeof workspace_bytes),
          "preference");
    int n = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt, s.op, s.w, s.x, s.y, s.y, pref, max, found, &n);
    cublasLtMatmulPreferenceDestroy(pref);
    return st == CUBLAS_STATUS_SUCCESS ? n : 0;
  }

  bool fits(const Shape& s, const cublasLtMatmulAlgo_t& algo) const {
    cublasLtMatmulHeuristicResult_t r{};
    return cublasLtMatmulAlgoCheck(lt, s.op, s.w, s.x, s.y, s.y, &algo, &r) ==
               CUBLAS_STATUS_SUCCESS &&
           r.workspaceSize <= workspace_bytes;
  }

  cublasStatus_t matmul(const Shape& s, const cublasLtMatmulAlgo_t& algo, const int8_t* xq,
                        const int8_t* wq, int32_t* acc, cudaStream_t stream) const {
    const int32_t alpha = 1, beta = 0;
    return cublasLtMatmul(lt, s.op, &alpha, wq, s.w, xq, s.x, &beta, acc, s.y, acc, s.y, &algo,
                          workspace, workspace_bytes, stream);
  }
};

Int8Gemm::Int8Gemm(void* workspace, size_t workspace_bytes) : plans_(std::make_unique<Plans>()) {
  check(cublasLtCreate(&plans_->lt), "handle");
  plans_->workspace = workspace;
  plans_->workspace_bytes = workspace_bytes;
}

Int8Gemm::~Int8Gemm() = default;

void Int8Gemm::run(const int8_t* xq, const int8_t* wq, int32_t* acc, int M, int N, int K,
                   cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  if (!supported(K))
    throw std::invalid_argument("int8 GEMM: K = " + std::to_string(K) +
                                " must be a positive multiple of 4");
  if (((reinterpret_cast<uintptr_t>(xq) | reinterpret_cast<uintptr_t>(wq) |
        reinterpret_cast<uintptr_t>(acc)) & 255u) != 0)
    throw std::invalid_argument("int8 GEMM: operands must be 256-byte aligned (as cudaMalloc gives)");
  Plans& p = *plans_;
  Plans::Shape& s = p.shape(M, N, K);
  if (!s.has_algo) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess)
      throw std::runtime_error("int8 GEMM: cannot query the stream's capture status");
    const auto chosen = p.choices.find({row_bucket(M), N, K});
    if (chosen == p.choices.end() && capture == cudaStreamCaptureStatusNone) {
      tune(xq, wq, acc, M, N, K, stream);
      return run(xq, wq, acc, M, N, K, stream);
    }
    if (chosen != p.choices.end() && p.fits(s, chosen->second)) {
      s.algo = chosen->second;
      s.has_algo = true;
    } else {  // during capture, or the bucket's choice does not take this shape
      cublasLtMatmulHeuristicResult_t first{};
      if (p.propose(s, &first, 1) < 1)
        throw std::runtime_error("int8 GEMM: cuBLASLt has no algorithm for " + std::to_string(M) +
                                 " x " + std::to_string(N) + " x " + std::to_string(K));
      check(p.matmul(s, first.algo, xq, wq, acc, stream), "matmul");
      return;
    }
  }
  check(p.matmul(s, s.algo, xq, wq, acc, stream), "matmul");
}

Int8Gemm::Tuning Int8Gemm::tune(const int8_t* xq, const int8_t* wq, int32_t* acc, int M, int N,
                                int K, cudaStream_t stream) {
  if (M <= 0 || N <= 0 || !supported(K))
    throw std::invalid_argument("int8 GEMM tuning: needs M, N > 0 and K a positive multiple of 4");
  Plans& p = *plans_;
  const Plans::Shape& s = p.shape(M, N, K);
  constexpr int kCandidates = 16, kRounds = 10;
  cublasLtMatmulHeuristicResult_t found[kCandidates];
  const int n = p.propose(s, found, kCandidates);
  if (n < 1)
    throw std::runtime_error("int8 GEMM: cuBLASLt has no algorithm for " + std::to_string(M) +
                             " x " + std::to_string(N) + " x " + std::to_string(K));
  Tuning t;
  int best = -1;
  for (int c = 0; c < n; ++c) {
    const double us = detail::mean_call_us(
        [&](int) { return p.matmul(s, found[c].algo, xq, wq, acc, stream) == CUBLAS_STATUS_SUCCESS; },
        1, kRounds, stream);
    ++t.candidates;
    if (c == 0) t.heuristic_us = us;
    if (us > 0 && (best < 0 || us < t.best_us)) t.best_us = us, best = c;
  }
  if (best < 0) throw std::runtime_error("int8 GEMM: no proposed algorithm ran");
  p.choices[{row_bucket(M), N, K}] = found[best].algo;
  for (auto& [key, shape] : p.shapes)  // shapes of this bucket pick the new choice up
    if (std::get<1>(key) == N && std::get<2>(key) == K && row_bucket(std::get<0>(key)) == row_bucket(M))
      shape.has_algo = false;
  return t;
}

#define LMX_INSTANTIATE(T)                                                                   \
  template void w8a8_scale_epilogue<T>(const int32_t*, const float*, const float*, T*, int, \
                                       int, cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
