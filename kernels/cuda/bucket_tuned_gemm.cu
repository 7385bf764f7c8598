#include "kernels/cuda/bucket_tuned_gemm.cuh"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/call_timing.cuh"

namespace lmx::kernels::cuda {
int gemm_row_bucket(int M) {
  int b = 16;
  while (b < M) b *= 2;
  return b;
}

bool stream_capturing(cudaStream_t stream, const char* what) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": cannot query the stream's capture status");
  return capture != cudaStreamCaptureStatusNone;
}

BucketTunedGemm::BucketTunedGemm(const char* what, const LtTypes& types, void* workspace,
                                 size_t workspace_bytes)
    : what_(what), types_(types), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  lt_check(cublasLtCreate(&lt_), "handle");
}

BucketTunedGemm::~BucketTunedGemm() {
  shapes_.clear();  // their descriptors before the handle
  cublasLtDestroy(lt_);
}

BucketTunedGemm::Shape& BucketTunedGemm::shape(int M, int N, int K) {
  auto it = shapes_.find({M, N, K});
  if (it == shapes_.end()) it = shapes_.emplace(Key{M, N, K}, Shape{LtPlan(types_, M, N, K)}).first;
  return it->second;
}

cublasStatus_t BucketTunedGemm::matmul(const Shape& s, const cublasLtMatmulAlgo_t& algo,
                                       const void* x, const void* w, void* y, const float* ws,
                                       const float* xs, cudaStream_t stream) const {
  const int32_t ione = 1, izero = 0;
  const float one = 1.0f, zero = 0.0f;
  const bool int_scale = types_.scale == CUDA_R_32I;
  const void* alpha = int_scale ? static_cast<const void*>(&ione) : &one;
  const void* beta = int_scale ? static_cast<const void*>(&izero) : &zero;
  return cublasLtMatmul(lt_, s.plan.op, alpha, w, s.plan.w, x, s.plan.x, beta, y, s.plan.y, y,
                        s.plan.y, &algo, workspace_, workspace_bytes_, stream);
}

void BucketTunedGemm::no_algorithm(int M, int N, int K) const {
  throw std::runtime_error(std::string(what_) + ": cuBLASLt has no algorithm for " +
                           std::to_string(M) + " x " + std::to_string(N) + " x " +
                           std::to_string(K) + " on this GPU");
}

void BucketTunedGemm::run(const void* x, const void* w, void* y, int M, int N, int K,
                          const float* ws, const float* xs, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  if (((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) |
        reinterpret_cast<uintptr_t>(y)) & 255u) != 0)
    throw std::invalid_argument(std::string(what_) +
                                ": operands must be 256-byte aligned (as cudaMalloc gives)");
  Shape& s = shape(M, N, K);
  // Before any heuristic query too: cuBLASLt proposes no outer-vector algorithm without them.
  if (types_.outer_vec_scales) s.plan.set_scales(ws, xs);
  if (!s.has_algo) {
    const bool capturing = stream_capturing(stream, what_);
    const auto chosen = choices_.find({gemm_row_bucket(M), N, K});
    if (chosen == choices_.end() && !capturing) {
      tune(x, w, y, M, N, K, ws, xs, stream);
      return run(x, w, y, M, N, K, ws, xs, stream);
    }
    if (chosen != choices_.end() && s.plan.fits(lt_, chosen->second, workspace_bytes_)) {
      s.algo = chosen->second;
      s.has_algo = true;
    } else {  // during capture, or the bucket's choice does not take this shape
      cublasLtMatmulHeuristicResult_t first{};
      if (s.plan.propose(lt_, workspace_bytes_, &first, 1) < 1) no_algorithm(M, N, K);
      lt_check(matmul(s, first.algo, x, w, y, ws, xs, stream), what_);
      return;
    }
  }
  lt_check(matmul(s, s.algo, x, w, y, ws, xs, stream), what_);
}

GemmTiming BucketTunedGemm::tune(const void* x, const void* w, void* y, int M, int N, int K,
                                 const float* ws, const float* xs, cudaStream_t stream) {
  if (M <= 0 || N <= 0 || K <= 0)
    throw std::invalid_argument(std::string(what_) + " tuning: needs M, N, K > 0");
  const Shape& s = shape(M, N, K);
  if (types_.outer_vec_scales) s.plan.set_scales(ws, xs);
  constexpr int kCandidates = 16, kRounds = 10;
  cublasLtMatmulHeuristicResult_t found[kCandidates];
  const int n = s.plan.propose(lt_, workspace_bytes_, found, kCandidates);
  if (n < 1) no_algorithm(M, N, K);
  GemmTiming t;
  int best = -1;
  for (int c = 0; c < n; ++c) {
    const double us = detail::mean_call_us(
        [&](int) {
          return matmul(s, found[c].algo, x, w, y, ws, xs, stream) == CUBLAS_STATUS_SUCCESS;
        },
        1, kRounds, stream);
    ++t.candidates;
    if (c == 0) t.heuristic_us = us;
    if (us > 0 && (best < 0 || us < t.best_us)) t.best_us = us, best = c;
  }
  if (best < 0) throw std::runtime_error(std::string(what_) + ": no proposed algorithm ran");
  choices_[{gemm_row_bucket(M), N, K}] = found[best].algo;
  for (auto& [key, shape] : shapes_)  // shapes of this bucket pick the new choice up
    if (std::get<1>(key) == N && std::get<2>(key) == K &&
        gemm_row_bucket(std::get<0>(key)) == gemm_row_bucket(M))
      shape.has_algo = false;
  return t;
}

}  // namespace lmx::kernels::cuda
