// Microbenchmark of the W8A16 GEMM (kernels/byte_weight_gemm.h) at Llama-2-7B's projection shapes
// and its LM head, for the rows the decode GEMV does not take (decode batches, prefill). For each
// (M, N, K), in one run on one GPU:
//   fp16      y = x · w^T through kernels::cuda::linear after tune_linear (what fp16 runs);
//   dequant   dynamic_int8's earlier path: dequantize_rows_int8 into a T scratch, then that GEMM;
//   int8      ByteWeightGemm on the int8 values (no T copy of the weights);
//   e4m3      ByteWeightGemm on E4M3 codes, and fp8's W8A8 projection (quantize_rows_e4m3 of x,
//             Fp8Gemm after its tuning) for comparison.
// Each call reads another copy of the weights, round-robin over enough copies to pass 128 MB, so
// the weights come from HBM as in a model's step, not from L2. Printed: time a call (CUDA events
// around 20 rounds after a warm-up), TFLOP/s (2 M N K / time), the weights' GB/s (their bytes /
// time) and the speed-up over fp16.
// Usage: lmx_bench_byte_weight_gemm [--rows 16,32,64,128,512,4096] [--shape NAME]
//        [--blocks-per-sm B] [--splits S] [--max-tile-rows R] (ByteWeightGemm's split target,
//        S splits of K instead of the planned, the mma.sync tile cap)
//        [--wgmma-min-rows R] [--wgmma-tile MxN] (where the wgmma kernel starts; its tile)
//        [--no-rotate] (every block walks K from its start: Options::rotate_k off)
// The int8 column is what ByteWeightGemm plans (wgmma from 64 rows on Hopper), "int8 mma.sync"
// the mma.sync kernel on the same call.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/kernels/cuda_check.h"
#include "bench/kernels/fill_uniform.cuh"
#include "kernels/byte_weight_gemm.h"
#include "kernels/cuda/call_timing.cuh"
#include "kernels/fp8_linear.h"
#include "kernels/gemm.h"
#include "kernels/quantize.h"

namespace k = lmx::kernels::cuda;
using lmx::bench::alloc_random;
using lmx::kernels::LinearWeights;

namespace {

struct Shape {
  const char* name;
  int N, K;
};
constexpr Shape kShapes[] = {{"qkv", 12288, 4096},
                             {"gate_up", 22016, 4096},
                             {"down", 4096, 11008},
                             {"o_proj", 4096, 4096},
                             {"lm_head", 32000, 4096}};

// Enough copies of `bytes` to pass 128 MB.
int copies_for(size_t bytes) { return int(std::max<size_t>(1, (128u << 20) / bytes + 1)); }

template <typename Call>
double time_us(Call&& call, int count, cudaStream_t stream) {
  const double us = k::detail::mean_call_us(
      [&](int i) {
        call(i);
        return true;
      },
      count, std::max(2, 40 / count), stream);
  CHECK(cudaGetLastError());
  return us;
}

struct Copies {
  std::vector<void*> p;
  ~Copies() {
    for (void* q : p) cudaFree(q);
  }
};

void run_shape(const Shape& s, int M, k::GemmContext& ctx, k::ByteWeightGemm& bw,
               k::ByteWeightGemm& mma_only, k::Fp8Gemm<__half>& fp8, cudaStream_t stream) {
  const size_t wn = size_t(s.N) * s.K, xn = size_t(M) * s.K, yn = size_t(M) * s.N;
  const int n16 = copies_for(wn * 2), n8 = copies_for(wn);
  Copies w16, q8, e8, scales;
  for (int i = 0; i < n16; ++i) w16.p.push_back(alloc_random<__half>(wn, 31u + i, stream, 0.05f));
  for (int i = 0; i < n8; ++i) {
    q8.p.push_back(alloc_random<int8_t>(wn, 41u + i, stream, 127.0f));
    e8.p.push_back(alloc_random<int8_t>(wn, 51u + i, stream, 100.0f));  // E4M3 codes: any bytes
  }
  float* ws = alloc_random<float>(size_t(s.N), 61u, stream, 1e-3f);
  scales.p.push_back(ws);
  __half* x = alloc_random<__half>(xn, 71u + M, stream);
  __half *y = nullptr, *scratch = nullptr;
  uint8_t* xq8 = nullptr;
  float* xs = nullptr;
  CHECK(cudaMalloc(&y, yn * sizeof(__half)));
  CHECK(cudaMalloc(&scratch, wn * sizeof(__half)));
  CHECK(cudaMalloc(&xq8, xn));
  CHECK(cudaMalloc(&xs, size_t(M) * sizeof(float)));
  // E4M3 codes with the exponent's top bits cleared: no NaN (0x7f / 0xff) among them.
  for (void* p : e8.p) CHECK(cudaMemsetAsync(p, 0x33, wn, stream));

  std::vector<const __half*> w_list;
  for (void* p : w16.p) w_list.push_back(static_cast<const __half*>(p));
  const k::LinearTuning tuning = k::tune_linear<__half, __half>(
      ctx, w_list.data(), int(w_list.size()), x, y, M, s.N, s.K, stream);
  auto dense = [&](int i) {
    return LinearWeights<__half>{w_list[size_t(i) % w_list.size()], nullptr, s.N, s.K};
  };
  auto bytes = [&](const Copies& c, int i, bool e4m3) {
    return LinearWeights<__half>{nullptr, nullptr, s.N, s.K,
                                 static_cast<const int8_t*>(c.p[size_t(i) % c.p.size()]), ws,
                                 e4m3};
  };
  const double fp16_us = time_us([&](int i) { k::linear<__half>(ctx, x, dense(i), y, M, stream); },
                                 n16, stream);
  const double dequant_us = time_us(
      [&](int i) {
        const auto q = bytes(q8, i, false);
        k::dequantize_rows_int8<__half>(q.q, ws, scratch, s.N, s.K, stream);
        k::linear<__half>(ctx, x, LinearWeights<__half>{scratch, nullptr, s.N, s.K}, y, M, stream);
      },
      n8, stream);
  const double int8_us =
      time_us([&](int i) { bw.run<__half, __half>(x, bytes(q8, i, false), y, M, stream); }, n8,
              stream);
  const double mma_us =
      time_us([&](int i) { mma_only.run<__half, __half>(x, bytes(q8, i, false), y, M, stream); },
              n8, stream);
  const double e4m3_us =
      time_us([&](int i) { bw.run<__half, __half>(x, bytes(e8, i, true), y, M, stream); }, n8,
              stream);
  k::quantize_rows_e4m3<__half>(x, xq8, xs, M, s.K, s.K, stream);
  const auto* codes0 = static_cast<const uint8_t*>(e8.p[0]);
  fp8.tune(xq8, xs, codes0, ws, y, M, s.N, s.K, stream);
  const double fp8_linear_us = time_us(
      [&](int i) {
        k::quantize_rows_e4m3<__half>(x, xq8, xs, M, s.K, s.K, stream);
        fp8.run(xq8, xs, static_cast<const uint8_t*>(e8.p[size_t(i) % e8.p.size()]), ws, y, M,
                s.N, s.K, stream);
      },
      n8, stream);
  const double flop = 2.0 * M * s.N * s.K;
  const k::ByteWeightGemm::Plan plan = bw.plan(M, s.N, s.K);
  auto col = [&](const char* name, double us, double weight_bytes) {
    std::printf(" | %s %7.1f us %4.0f TF %5.0f GB/s %.2fx", name, us, flop / (us * 1e6),
                weight_bytes / (us * 1e3), fp16_us / us);
  };
  std::printf("%-8s %5d %5dx%-5d (%s tile %d x %d, %d tiles, %d splits)", s.name, M, s.N, s.K,
              plan.wgmma ? "wgmma" : "mma.sync", plan.rows_per_tile, plan.weight_rows_per_tile,
              plan.tiles(), plan.splits);
  col("fp16", fp16_us, 2.0 * wn);
  col("dequant", dequant_us, double(wn));
  col("int8", int8_us, double(wn));
  col("int8 mma.sync", mma_us, double(wn));
  col("e4m3", e4m3_us, double(wn));
  col("fp8 W8A8", fp8_linear_us, double(wn));
  std::printf(" [fp16: %s]\n", tuning.lt ? "cuBLASLt" : "default");
  std::fflush(stdout);
  cudaFree(x), cudaFree(y), cudaFree(scratch), cudaFree(xq8), cudaFree(xs);
}

std::vector<int> parse_rows(const char* s) {
  std::vector<int> rows;
  for (const char* p = s; *p;) {
    rows.push_back(std::atoi(p));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> rows = {16, 32, 64, 128, 512, 4096};
  const char* only = nullptr;
  k::ByteWeightGemm::Options options;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) {
      rows = parse_rows(argv[++i]);
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--blocks-per-sm") && i + 1 < argc) {
      options.blocks_per_sm = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--splits") && i + 1 < argc) {
      options.splits = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--max-tile-rows") && i + 1 < argc) {
      options.max_tile_rows = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--no-rotate")) {
      options.rotate_k = false;
    } else if (!std::strcmp(argv[i], "--wgmma-min-rows") && i + 1 < argc) {
      options.wgmma_min_rows = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--wgmma-tile") && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%dx%d", &options.wgmma_rows_m, &options.wgmma_rows_n) ==
                   2) {
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: lmx_bench_byte_weight_gemm [--rows 16,32,...] [--shape qkv|gate_up|"
                   "down|o_proj|lm_head] [--blocks-per-sm B] [--splits S] [--max-tile-rows R] "
                   "[--wgmma-min-rows R] [--wgmma-tile MxN] [--no-rotate]\n");
      return 2;
    }
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  k::GemmContext ctx;
  k::ByteWeightGemm bw(options);
  k::ByteWeightGemm::Options mma_options = options;
  mma_options.wgmma_min_rows = 1 << 30;  // the mma.sync kernel at every M, for comparison
  k::ByteWeightGemm mma_only(mma_options);
  k::Fp8Gemm<__half> fp8(ctx.workspace(), ctx.workspace_bytes());
  for (int M : rows)
    for (const Shape& s : kShapes)
      if (!only || !std::strcmp(only, s.name)) run_shape(s, M, ctx, bw, mma_only, fp8, stream);
  CHECK(cudaStreamDestroy(stream));
  return 0;
}
