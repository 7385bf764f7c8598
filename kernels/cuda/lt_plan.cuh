// The one cuBLASLt matmul shape every LMX GEMM runs (kernels/cuda/gemm.cu, bucket_tuned_gemm.cu):
// row-major y [M, N] = x [M, K] · w [N, K]^T, which is column-major y^T (N x M) = op_T(w) · x,
// the TN layout Hopper's fp16, int8 and fp8 tensor-core kernels all take. An LtPlan holds the
// descriptors of one (types, M, N, K); `propose` asks cuBLASLt for algorithms for it.
#pragma once

#include <cublasLt.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace lmx::kernels::cuda {

// Element and arithmetic types of a plan. outer_vec_scales: y = (ws[n] * xs[m]) * sum (fp32
// vectors, w's per output channel and x's per row), set per call (LtPlan::set_scales).
struct LtTypes {
  cublasComputeType_t compute;
  cudaDataType_t scale, w, x, y;
  bool outer_vec_scales = false;
};

inline void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt ") + what +
                             " failed: " + cublasGetStatusString(s));
}

struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;

  LtPlan() = default;
  LtPlan(const LtTypes& t, int M, int N, int K) {
    try {
      const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
      lt_check(cublasLtMatmulDescCreate(&op, t.compute, t.scale), "descriptor");
      lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                              sizeof transpose),
               "transa");
      lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none),
               "transb");
      if (t.outer_vec_scales) {
        const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec,
                                                sizeof vec),
                 "A scale mode");
        lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec,
                                                sizeof vec),
                 "B scale mode");
      }
      lt_check(cublasLtMatrixLayoutCreate(&w, t.w, K, N, K), "layout");
      lt_check(cublasLtMatrixLayoutCreate(&x, t.x, K, M, K), "layout");
      lt_check(cublasLtMatrixLayoutCreate(&y, t.y, N, M, N), "layout");
    } catch (...) {
      release();
      throw;
    }
  }
  LtPlan(LtPlan&& o) noexcept { *this = std::move(o); }
  LtPlan& operator=(LtPlan&& o) noexcept {
    if (this != &o) {
      release();
      std::swap(op, o.op), std::swap(w, o.w), std::swap(x, o.x), std::swap(y, o.y);
    }
    return *this;
  }
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() { release(); }

  // Outer-vector plans: the scale vectors of the next call (ws [N] of w, xs [M] of x, device).
  void set_scales(const float* ws, const float* xs) const {
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws,
                                            sizeof ws),
             "A scale pointer");
    lt_check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &xs,
                                            sizeof xs),
             "B scale pointer");
  }

  // Up to `max` algorithms cuBLASLt proposes within `workspace_bytes`, best guess first (0 when
  // it has none for these types).
  int propose(cublasLtHandle_t lt, size_t workspace_bytes, cublasLtMatmulHeuristicResult_t* found,
              int max) const {
    cublasLtMatmulPreference_t pref = nullptr;
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "preference");
    const cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes);
    int n = 0;
    const bool ok = s == CUBLAS_STATUS_SUCCESS &&
                    cublasLtMatmulAlgoGetHeuristic(lt, op, w, x, y, y, pref, max, found, &n) ==
                        CUBLAS_STATUS_SUCCESS;
    cublasLtMatmulPreferenceDestroy(pref);
    return ok ? n : 0;
  }

  // Whether `algo` (chosen for another shape) runs this one within `workspace_bytes`.
  bool fits(cublasLtHandle_t lt, const cublasLtMatmulAlgo_t& algo, size_t workspace_bytes) const {
    cublasLtMatmulHeuristicResult_t r{};
    return cublasLtMatmulAlgoCheck(lt, op, w, x, y, y, &algo, &r) == CUBLAS_STATUS_SUCCESS &&
           r.workspaceSize <= workspace_bytes;
  }

 private:
  void release() {
    if (op) cublasLtMatmulDescDestroy(op);
    if (w) cublasLtMatrixLayoutDestroy(w);
    if (x) cublasLtMatrixLayoutDestroy(x);
    if (y) cublasLtMatrixLayoutDestroy(y);
    op = nullptr, w = x = y = nullptr;
  }
};

}  // namespace lmx::kernels::cuda
