// Microbenchmark of smoothquant's prefill GEMMs at Llama-2-7B's shapes (issue: int8 >= 1.7x the
// fp16 rate at M = 4096): for each (M, N, K), in one run on one GPU,
//   fp16   y = x · w^T through kernels::cuda::linear with the algorithm tune_linear keeps (cuBLAS's
//          default or the fastest cuBLASLt proposal): what an fp16 prefill runs;
//   int8   acc = xq · wq^T through kernels::cuda::Int8Gemm after its tuning (every proposal timed);
//   W8A8   the whole projection as the backend runs it: quantize_rows_int8 of the fp16 x, the int8
//          GEMM, w8a8_scale_epilogue back to fp16;
//   fp8    y = (ws xs) · xq8 · wq8^T through kernels::cuda::Fp8Gemm<__half> after its tuning (E4M3
//          codes of the same random weights, both scales in cuBLASLt's epilogue), and the whole
//          fp8 projection: quantize_rows_e4m3 of the fp16 x, then that GEMM (option.quantize=fp8);
//   W8A8 wgmma  the int8 GEMM and its scales in one Hopper kernel (w8a8_wgmma_gemm), alone and
//          after quantize_rows_int8 (the projection as the backend runs it at prefill sizes);
//   quantize x  the activations' quantizers alone (int8, int8 with smoothquant's 1/s, E4M3), in
//          GB/s of x read and codes written.
// Rates: 2 M N K / time (TFLOP/s; int8: TOPS) and the ratio to fp16. Operands are random values
// (constants draw less power and run faster). Times: CUDA events around 20 calls after a warm-up.
// --probe: which fused-scale forms cuBLASLt offers on this GPU (the int32 output costs an extra
// pass over [M, N]), each timed at 4096 x 12288 x 4096 when offered:
//   int8 -> D (8I, 32I, 16F, 16BF, 32F) with an fp32 scale, host scalar or a device alpha vector
//   (one scale an output channel), or per-row x per-column (outer vector) scale modes;
//   fp8 e4m3 -> bf16 with outer vector scales (per token x per channel).
// Usage: lmx_bench_int8_gemm [--rows 512,4096] [--probe]
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/kernels/cuda_check.h"
#include "bench/kernels/fill_uniform.cuh"
#include "kernels/cuda/call_timing.cuh"
#include "kernels/fp8_linear.h"
#include "kernels/gemm.h"
#include "kernels/quantize.h"
#include "kernels/w8a8.h"

namespace k = lmx::kernels::cuda;

namespace {

struct Shape {
  const char* name;
  int N, K;
};
// Llama-2-7B: qkv, gate+up, down, o.
constexpr Shape kShapes[] = {
    {"qkv", 12288, 4096}, {"gate_up", 22016, 4096}, {"down", 4096, 11008}, {"o_proj", 4096, 4096}};

template <typename Call>
double time_us(Call&& call, cudaStream_t stream) {
  const double us = k::detail::mean_call_us(
      [&](int) {
        call();
        return true;
      },
      1, 20, stream);
  CHECK(cudaGetLastError());
  return us;
}

void run_shape(const Shape& s, int M, k::GemmContext& ctx, k::Int8Gemm& int8,
               k::Fp8Gemm<__half>& fp8, cudaStream_t stream) {
  using lmx::bench::alloc_random;
  const size_t wn = size_t(s.N) * s.K, xn = size_t(M) * s.K, yn = size_t(M) * s.N;
  __half* w = alloc_random<__half>(wn, 11u + s.N, stream, 0.05f);
  __half* x = alloc_random<__half>(xn, 12u + M, stream);
  __half* y = nullptr;
  CHECK(cudaMalloc(&y, yn * sizeof(__half)));
  int8_t* wq = alloc_random<int8_t>(wn, 13u + s.N, stream, 127.0f);
  int8_t* xq = alloc_random<int8_t>(xn, 14u + M, stream, 127.0f);
  float *ws = nullptr, *xs = nullptr;
  int32_t* acc = nullptr;
  CHECK(cudaMalloc(&ws, size_t(s.N) * sizeof(float)));
  CHECK(cudaMalloc(&xs, size_t(M) * sizeof(float)));
  CHECK(cudaMalloc(&acc, yn * sizeof(int32_t)));
  CHECK(cudaMemsetAsync(ws, 0, size_t(s.N) * sizeof(float), stream));

  const __half* ws_list[] = {w};
  const k::LinearTuning fp16_tuning =
      k::tune_linear<__half, __half>(ctx, ws_list, 1, x, y, M, s.N, s.K, stream);
  const lmx::kernels::LinearWeights<__half> lw{w, nullptr, s.N, s.K};
  const double fp16_us = time_us([&] { k::linear<__half>(ctx, x, lw, y, M, stream); }, stream);
  const k::GemmTiming t = int8.tune(xq, wq, acc, M, s.N, s.K, stream);
  const double int8_us = time_us([&] { int8.run(xq, wq, acc, M, s.N, s.K, stream); }, stream);
  const double w8a8_us = time_us(
      [&] {
        k::quantize_rows_int8<__half>(x, nullptr, xq, xs, M, s.K, stream);
        int8.run(xq, wq, acc, M, s.N, s.K, stream);
        k::w8a8_scale_epilogue<__half>(acc, xs, ws, y, M, s.N, stream);
      },
      stream);
  // The fused Hopper kernel (kernels/cuda/w8a8_wgmma.cu): the GEMM with its scale epilogue, and
  // the projection with it.
  const bool fused = k::w8a8_wgmma_supported(s.K);
  const double fused_us =
      fused ? time_us([&] { k::w8a8_wgmma_gemm<__half>(xq, wq, xs, ws, y, M, s.N, s.K, stream); },
                      stream)
            : 0.0;
  const double fused_linear_us =
      fused ? time_us(
                  [&] {
                    k::quantize_rows_int8<__half>(x, nullptr, xq, xs, M, s.K, stream);
                    k::w8a8_wgmma_gemm<__half>(xq, wq, xs, ws, y, M, s.N, s.K, stream);
                  },
                  stream)
            : 0.0;
  uint8_t *wq8 = nullptr, *xq8 = nullptr;
  float* ws8 = nullptr;
  CHECK(cudaMalloc(&wq8, wn));
  CHECK(cudaMalloc(&xq8, xn));
  CHECK(cudaMalloc(&ws8, size_t(s.N) * sizeof(float)));
  k::quantize_rows_e4m3<__half>(w, wq8, ws8, s.N, s.K, s.K, stream);
  k::quantize_rows_e4m3<__half>(x, xq8, xs, M, s.K, s.K, stream);
  const k::GemmTiming t8 = fp8.tune(xq8, xs, wq8, ws8, y, M, s.N, s.K, stream);
  const double fp8_us = time_us([&] { fp8.run(xq8, xs, wq8, ws8, y, M, s.N, s.K, stream); }, stream);
  const double fp8_linear_us = time_us(
      [&] {
        k::quantize_rows_e4m3<__half>(x, xq8, xs, M, s.K, s.K, stream);
        fp8.run(xq8, xs, wq8, ws8, y, M, s.N, s.K, stream);
      },
      stream);
  const double flop = 2.0 * M * s.N * s.K;
  std::printf(
      "%-8s %5d %5dx%-5d | fp16 %7.1f us %6.0f TFLOP/s (%s) | int8 %7.1f us %6.0f TOPS %.2fx "
      "(heuristic's first %.1f us, %d tried) | W8A8 linear %7.1f us %.2fx\n",
      s.name, M, s.N, s.K, fp16_us, flop / (fp16_us * 1e6),
      fp16_tuning.lt ? "cuBLASLt" : "default", int8_us, flop / (int8_us * 1e6), fp16_us / int8_us,
      t.heuristic_us, t.candidates, w8a8_us, fp16_us / w8a8_us);
  std::printf(
      "%-8s %5d %5dx%-5d | fp8 %7.1f us %6.0f TFLOP/s %.2fx (heuristic's first %.1f us, %d tried) "
      "| fp8 linear %7.1f us %.2fx\n",
      s.name, M, s.N, s.K, fp8_us, flop / (fp8_us * 1e6), fp16_us / fp8_us, t8.heuristic_us,
      t8.candidates, fp8_linear_us, fp16_us / fp8_linear_us);
  if (fused)
    std::printf(
        "%-8s %5d %5dx%-5d | W8A8 wgmma (GEMM + scales) %7.1f us %6.0f TOPS %.2fx | W8A8 linear "
        "wgmma %7.1f us %.2fx\n",
        s.name, M, s.N, s.K, fused_us, flop / (fused_us * 1e6), fp16_us / fused_us,
        fused_linear_us, fp16_us / fused_linear_us);
  // The activations' quantizers alone (the first step of every W8A8 and fp8 projection above):
  // plain int8, int8 with a column scale (smoothquant's 1/s), E4M3; x read, codes and scales
  // written.
  float* inv_smooth = alloc_random<float>(size_t(s.K), 15u, stream, 1.0f);
  const double q_int8_us =
      time_us([&] { k::quantize_rows_int8<__half>(x, nullptr, xq, xs, M, s.K, stream); }, stream);
  const double q_smooth_us = time_us(
      [&] { k::quantize_rows_int8<__half>(x, inv_smooth, xq, xs, M, s.K, stream); }, stream);
  const double q_e4m3_us = time_us(
      [&] { k::quantize_rows_e4m3<__half>(x, xq8, xs, M, s.K, s.K, stream); }, stream);
  const double q_bytes = double(xn) * (sizeof(__half) + 1) + double(M) * sizeof(float);
  std::printf(
      "%-8s %5d x %-5d  | quantize x: int8 %6.1f us %5.0f GB/s | int8 with 1/s %6.1f us %5.0f GB/s "
      "| e4m3 %6.1f us %5.0f GB/s\n",
      s.name, M, s.K, q_int8_us, q_bytes / (q_int8_us * 1e3), q_smooth_us,
      q_bytes / (q_smooth_us * 1e3), q_e4m3_us, q_bytes / (q_e4m3_us * 1e3));
  std::fflush(stdout);
  cudaFree(inv_smooth);
  cudaFree(wq8), cudaFree(xq8), cudaFree(ws8);
  cudaFree(w), cudaFree(x), cudaFree(y), cudaFree(wq), cudaFree(xq), cudaFree(ws), cudaFree(xs);
  cudaFree(acc);
}

// One fused-scale form: a descriptor for M x N x K (TN, as Int8Gemm's), asked for algorithms;
// timed with the first when offered.
struct Form {
  const char* name;
  cublasComputeType_t compute;
  cudaDataType_t scale, ab, d;
  int pointer_mode;  // cublasLtPointerMode_t
  bool outer_vec;    // A and B scale modes OUTER_VEC_32F (per row of each operand)
};

void probe_form(cublasLtHandle_t lt, const Form& f, void* workspace, size_t workspace_bytes,
                cudaStream_t stream) {
  const int M = 4096, N = 12288, K = 4096;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  bool ok = cublasLtMatmulDescCreate(&op, f.compute, f.scale) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t) == 0;
  ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n) == 0;
  const int32_t mode = f.pointer_mode;
  ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode,
                                            sizeof mode) == 0;
  float *row_scale = nullptr, *col_scale = nullptr;
  CHECK(cudaMalloc(&row_scale, M * sizeof(float)));
  CHECK(cudaMalloc(&col_scale, N * sizeof(float)));
  if (f.outer_vec) {
    const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec, sizeof vec) == 0;
    ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec, sizeof vec) == 0;
    ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &col_scale,
                                              sizeof col_scale) == 0;
    ok = ok && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &row_scale,
                                              sizeof row_scale) == 0;
  }
  ok = ok && cublasLtMatrixLayoutCreate(&a, f.ab, K, N, K) == 0;
  ok = ok && cublasLtMatrixLayoutCreate(&b, f.ab, K, M, K) == 0;
  ok = ok && cublasLtMatrixLayoutCreate(&d, f.d, N, M, N) == 0;
  ok = ok && cublasLtMatmulPreferenceCreate(&pref) == 0;
  ok = ok && cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &workspace_bytes, sizeof workspace_bytes) == 0;
  cublasLtMatmulHeuristicResult_t found[8];
  int count = 0;
  const cublasStatus_t st =
      ok ? cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, d, d, pref, 8, found, &count)
         : CUBLAS_STATUS_INVALID_VALUE;
  std::printf("probe %-44s: %s, %d algorithms", f.name, ok ? cublasGetStatusString(st) : "descriptor refused", count);
  if (st == CUBLAS_STATUS_SUCCESS && count > 0) {
    const size_t elem_ab = f.ab == CUDA_R_8I || f.ab == CUDA_R_8F_E4M3 ? 1 : 2;
    const size_t elem_d = f.d == CUDA_R_32I || f.d == CUDA_R_32F ? 4 : f.d == CUDA_R_8I ? 1 : 2;
    void *wa = nullptr, *xb = nullptr, *yd = nullptr;
    CHECK(cudaMalloc(&wa, size_t(N) * K * elem_ab));
    CHECK(cudaMalloc(&xb, size_t(M) * K * elem_ab));
    CHECK(cudaMalloc(&yd, size_t(M) * N * elem_d));
    CHECK(cudaMemsetAsync(wa, 0x11, size_t(N) * K * elem_ab, stream));
    CHECK(cudaMemsetAsync(xb, 0x23, size_t(M) * K * elem_ab, stream));
    const float one = 1.0f, zero = 0.0f;
    const int32_t ione = 1, izero = 0;
    const bool int_scale = f.scale == CUDA_R_32I;
    const void* alpha = f.pointer_mode == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO
                            ? static_cast<const void*>(col_scale)
                            : int_scale ? static_cast<const void*>(&ione) : &one;
    const void* beta = int_scale ? static_cast<const void*>(&izero) : &zero;
    double best = 0;
    for (int c = 0; c < count; ++c) {
      const double us = k::detail::mean_call_us(
          [&](int) {
            return cublasLtMatmul(lt, op, alpha, wa, a, xb, b, beta, yd, d, yd, d, &found[c].algo,
                                  workspace, workspace_bytes, stream) == CUBLAS_STATUS_SUCCESS;
          },
          1, 10, stream);
      if (us > 0 && (best == 0 || us < best)) best = us;
    }
    if (best > 0)
      std::printf(", fastest %.1f us = %.0f T(FL)OP/s", best, 2.0 * M * N * K / (best * 1e6));
    cudaFree(wa), cudaFree(xb), cudaFree(yd);
  }
  std::printf("\n");
  std::fflush(stdout);
  cudaFree(row_scale), cudaFree(col_scale);
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (d) cublasLtMatrixLayoutDestroy(d);
  if (op) cublasLtMatmulDescDestroy(op);
}

void probe(const k::GemmContext& ctx, cudaStream_t stream) {
  cublasLtHandle_t lt = nullptr;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    std::printf("probe: no cuBLASLt handle\n");
    return;
  }
  constexpr int host = CUBLASLT_POINTER_MODE_HOST, vec = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO;
  const Form forms[] = {
      {"int8 -> int32, int32 scale (Int8Gemm)", CUBLAS_COMPUTE_32I, CUDA_R_32I, CUDA_R_8I, CUDA_R_32I, host, false},
      {"int8 -> int8, fp32 scale", CUBLAS_COMPUTE_32I, CUDA_R_32F, CUDA_R_8I, CUDA_R_8I, host, false},
      {"int8 -> int8, fp32 channel alpha vector", CUBLAS_COMPUTE_32I, CUDA_R_32F, CUDA_R_8I, CUDA_R_8I, vec, false},
      {"int8 -> fp16, fp32 scale", CUBLAS_COMPUTE_32I, CUDA_R_32F, CUDA_R_8I, CUDA_R_16F, host, false},
      {"int8 -> bf16, fp32 scale", CUBLAS_COMPUTE_32I, CUDA_R_32F, CUDA_R_8I, CUDA_R_16BF, host, false},
      {"int8 -> fp32, fp32 scale", CUBLAS_COMPUTE_32I, CUDA_R_32F, CUDA_R_8I, CUDA_R_32F, host, false},
      {"int8 -> fp16, fp32 channel alpha vector", CUBLAS_COMPUTE_32I, CUDA_R_32F, CUDA_R_8I, CUDA_R_16F, vec, false},
      {"int8 -> bf16, outer vector scales", CUBLAS_COMPUTE_32I, CUDA_R_32F, CUDA_R_8I, CUDA_R_16BF, host, true},
      {"int8 -> bf16, outer vector scales (32F compute)", CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8I, CUDA_R_16BF, host, true},
      {"fp8 e4m3 -> bf16, fp32 scale", CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, CUDA_R_16BF, host, false},
      {"fp8 e4m3 -> bf16, outer vector scales", CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, CUDA_R_16BF, host, true},
      {"fp8 e4m3 -> fp16, outer vector scales", CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, CUDA_R_16F, host, true},
  };
  for (const Form& f : forms) probe_form(lt, f, ctx.workspace(), ctx.workspace_bytes(), stream);
  cublasLtDestroy(lt);
}

std::vector<int> parse_rows(const char* text) {
  std::vector<int> rows;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v < 1 || v > 65536) {
      std::fprintf(stderr, "--rows: '%s' is not a list of row counts in [1, 65536]\n", text);
      std::exit(2);
    }
    rows.push_back(int(v));
    p = *end == ',' ? end + 1 : end;
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> rows = {512, 4096};
  bool probing = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) {
      rows = parse_rows(argv[++i]);
    } else if (!std::strcmp(argv[i], "--probe")) {
      probing = true;
    } else {
      std::fprintf(stderr, "usage: lmx_bench_int8_gemm [--rows 512,4096] [--probe]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s\n", prop.name);
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreate(&stream));
  k::GemmContext ctx;
  k::Int8Gemm int8(ctx.workspace(), ctx.workspace_bytes());
  k::Fp8Gemm<__half> fp8(ctx.workspace(), ctx.workspace_bytes());
  if (probing) probe(ctx, stream);
  for (int M : rows)
    for (const Shape& s : kShapes) run_shape(s, M, ctx, int8, fp8, stream);
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
