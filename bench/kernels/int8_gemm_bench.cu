// Microbenchmark of smoothquant's prefill GEMMs at Llama-2-7B's shapes (issue: int8 >= 1.7x the
// fp16 rate at M = 4096): for each (M, N, K), in one run on one GPU,
//   fp16   y = x · w^T through kernels::cuda::linear with the algorithm tune_linear keeps (cuBLAS's
//          default or the fastest cuBLASLt proposal): what an fp16 prefill runs;
//   int8   acc = xq · wq^T through kernels::cuda::Int8Gemm after its tuning (every proposal timed);
//   W8A8   the whole projection as the backend runs it: quantize_rows_int8 of the fp16 x, the int8
//          GEMM, w8a8_scale_epilogue back to fp16.
// Rates: 2 M N K / time (TFLOP/s; int8: TOPS) and the ratio to fp16. Operands are random values
// (constants draw less power and run faster). Times: CUDA events around 20 calls after a warm-up.
// Usage: lmx_bench_int8_gemm [--rows 512,4096]
#include <cuda_fp16.h>
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
               cudaStream_t stream) {
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
  const k::Int8Gemm::Tuning t = int8.tune(xq, wq, acc, M, s.N, s.K, stream);
  const double int8_us = time_us([&] { int8.run(xq, wq, acc, M, s.N, s.K, stream); }, stream);
  const double w8a8_us = time_us(
      [&] {
        k::quantize_rows_int8<__half>(x, nullptr, xq, xs, M, s.K, stream);
        int8.run(xq, wq, acc, M, s.N, s.K, stream);
        k::w8a8_scale_epilogue<__half>(acc, xs, ws, y, M, s.N, stream);
      },
      stream);
  const double flop = 2.0 * M * s.N * s.K;
  std::printf(
      "%-8s %5d %5dx%-5d | fp16 %7.1f us %6.0f TFLOP/s (%s) | int8 %7.1f us %6.0f TOPS %.2fx "
      "(heuristic's first %.1f us, %d tried) | W8A8 linear %7.1f us %.2fx\n",
      s.name, M, s.N, s.K, fp16_us, flop / (fp16_us * 1e6),
      fp16_tuning.lt ? "cuBLASLt" : "default", int8_us, flop / (int8_us * 1e6), fp16_us / int8_us,
      t.heuristic_us, t.candidates, w8a8_us, fp16_us / w8a8_us);
  std::fflush(stdout);
  cudaFree(w), cudaFree(x), cudaFree(y), cudaFree(wq), cudaFree(xq), cudaFree(ws), cudaFree(xs);
  cudaFree(acc);
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
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) {
      rows = parse_rows(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: lmx_bench_int8_gemm [--rows 512,4096]\n");
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
  for (int M : rows)
    for (const Shape& s : kShapes) run_shape(s, M, ctx, int8, stream);
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
