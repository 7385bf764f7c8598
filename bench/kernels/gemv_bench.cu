// Microbenchmark of the decode linear y[M, N] = x[M, K] · w[N, K]^T: cuBLAS (kernels::cuda::linear,
// what the backend runs by default) against the skinny GEMV (kernels::cuda::skinny_linear,
// kernels/cuda/gemv.cu) at Llama-2-7B shapes for M = 1, 2, 4, 8.
//   GB/s = weight bytes (N x K x sizeof(T)) / time; x and y are < 0.3% of the bytes at M <= 8.
//   The ceiling: a pure streaming read of 1 GiB measured at start on this device (an H100 SXM
//   reads ~3.0-3.2 TB/s; its device-to-device copy measures 3.0 TB/s, read + write).
//   Every call reads another copy of the weights (>= 4 copies, >= 256 MB a shape), so the 50 MB
//   L2 never holds them: the numbers are HBM numbers.
// Times: CUDA events around `iters` back-to-back calls after a warm-up, divided by iters. That
// includes the gap between consecutive kernels (of the order of 1 us, which matters at o_proj's
// ~12 us); Nsight Compute's per-kernel duration excludes it. --graph times the same calls
// captured in one CUDA graph, as decode runs them.
// The last column checks the skinny output against cuBLAS's: max |difference| / max |cuBLAS|
// (fp16 output rounding: ~1e-3; bf16: ~8e-3; fp32 output of the LM head: ~1e-6).
// --prefill: the same shapes at 512 and 4096 rows through cuBLAS, in TFLOP/s (prefill GEMMs).
// --weights int8|fp8: one-byte weights (dynamic_int8's int8 values, fp8's E4M3 codes; random
//   bytes, random row scales) through the same GEMV; the comparison column is then the W8A16 GEMM
//   (kernels::cuda::ByteWeightGemm, what runs past the GEMV's rows) instead of cuBLAS, and GB/s
//   counts one byte a weight.
// Usage: lmx_bench_gemv [--iters N (200)] [--dtype fp16|bf16 (fp16)] [--graph] [--prefill]
//                       [--weights 16bit|int8|fp8 (16bit)] [--shape
//                       qkv|o_proj|gate_up|down|lm_head]
//                       [--rows M,M,.. (1,2,4,8)] [--norm] [--chain]
// --chain: a decode layer's four projections in sequence (run_chain), a layer's time.
// --norm: the GEMV with its input RMS-normalized inside (skinny_linear_norm, the fused decode's
//   qkv and gate/up form; not the LM head, which stays plain), no reference check.
// Tuning variants of the kernel (compile-time knobs at the top of kernels/cuda/gemv.cu), built
// stand-alone from the repository root in a few seconds each:
//   nvcc -O3 -std=c++17 -arch=sm_90a -I. -DLMX_GEMV_WARPS=8 -DLMX_GEMV_STEPS=4 \
//     -DLMX_GEMV_MIN_BLOCKS=3 bench/kernels/gemv_bench.cu kernels/cuda/gemv.cu \
//     kernels/cuda/gemm.cu -lcublas -o /tmp/gemv_8_4_3
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "bench/kernels/cuda_check.h"
#include "bench/kernels/fill_uniform.cuh"
#include "kernels/byte_weight_gemm.h"
#include "kernels/gemm.h"
#include "kernels/linear.h"

namespace k = lmx::kernels::cuda;

namespace {

// What the weights are: T, or one byte a weight with an fp32 scale a row.
enum class Weights { k16Bit, kInt8, kE4M3 };

int g_iters = 200;
bool g_graph = false;
const char* g_shape = nullptr;           // --shape: only this one (all when null)
std::vector<int> g_rows = {1, 2, 4, 8};  // --rows: the decode row counts
bool g_norm = false;   // --norm: the GEMV with an RMS-normalized input (skinny_linear_norm)
bool g_chain = false;  // --chain: decode layers' four projections in sequence
cudaStream_t g_stream = nullptr;

struct Shape {
  const char* name;
  int N, K;
  bool f32_out;  // the LM head writes fp32 logits
};
// Llama-2-7B: hidden 4096, intermediate 11008, vocab 32000.
constexpr Shape kShapes[] = {{"qkv", 12288, 4096, false},
                             {"o_proj", 4096, 4096, false},
                             {"gate_up", 22016, 4096, false},
                             {"down", 4096, 11008, false},
                             {"lm_head", 32000, 4096, true}};
constexpr size_t kMinRotationBytes = size_t(256) << 20;  // > 5x the 50 MB L2

// Pure streaming read: every thread XORs four 16-byte loads an iteration (grid-stride).
__global__ void read_kernel(const uint4* __restrict__ p, size_t n, uint4* sink) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride),
                d = __ldcs(p + i + 3 * stride);
    acc.x ^= a.x ^ b.x ^ c.x ^ d.x, acc.y ^= a.y ^ b.y ^ c.y ^ d.y;
    acc.z ^= a.z ^ b.z ^ c.z ^ d.z, acc.w ^= a.w ^ b.w ^ c.w ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc.x ^= a.x, acc.y ^= a.y, acc.z ^= a.z, acc.w ^= a.w;
  }
  if ((acc.x & acc.y & acc.z & acc.w) == 0xffffffffu) *sink = acc;  // keeps the loads
}

double read_ceiling_gbs() {
  const size_t bytes = size_t(1) << 30, n = bytes / 16;
  uint4* p = nullptr;
  uint4* sink = nullptr;
  CHECK(cudaMalloc(&p, bytes));
  CHECK(cudaMalloc(&sink, 16));
  CHECK(cudaMemsetAsync(p, 0x5a, bytes, g_stream));
  int dev = 0, sms = 0, per_sm = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_kernel, 256, 0));
  const int grid = sms * per_sm;
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  read_kernel<<<grid, 256, 0, g_stream>>>(p, n, sink);
  CHECK(cudaEventRecord(a, g_stream));
  const int reps = 20;
  for (int r = 0; r < reps; ++r) read_kernel<<<grid, 256, 0, g_stream>>>(p, n, sink);
  CHECK(cudaEventRecord(b, g_stream));
  CHECK(cudaEventSynchronize(b));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(p);
  cudaFree(sink);
  return double(bytes) * reps / (ms * 1e6);
}

// Microseconds per call of call(i), i = 0, 1, ... (the call picks its weight copy from i).
double time_us(const std::function<void(int)>& call, int copies) {
  for (int i = 0; i < 2 * copies; ++i) call(i);  // warm-up (and cuBLAS's heuristics cache)
  CHECK(cudaGetLastError());
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  cudaGraphExec_t exec = nullptr;
  if (g_graph) {
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < g_iters; ++i) call(i);
    CHECK(cudaStreamEndCapture(g_stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaGraphLaunch(exec, g_stream));  // warm-up of the graph itself
  }
  CHECK(cudaEventRecord(a, g_stream));
  if (g_graph) {
    CHECK(cudaGraphLaunch(exec, g_stream));
  } else {
    for (int i = 0; i < g_iters; ++i) call(i);
  }
  CHECK(cudaEventRecord(b, g_stream));
  CHECK(cudaEventSynchronize(b));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  if (exec) cudaGraphExecDestroy(exec);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 1e3 * ms / g_iters;
}

// max |a - b| / max |b| over n device values of type U.
template <typename U>
double rel_diff(const U* da, const U* db, size_t n) {
  std::vector<U> a(n), b(n);
  CHECK(cudaMemcpy(a.data(), da, n * sizeof(U), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(b.data(), db, n * sizeof(U), cudaMemcpyDeviceToHost));
  double diff = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = double(float(a[i])), y = double(float(b[i]));
    if (!std::isfinite(x)) return INFINITY;
    diff = std::max(diff, std::fabs(x - y));
    ref = std::max(ref, std::fabs(y));
  }
  return ref > 0 ? diff / ref : diff;
}

// `copies` copies of an N x K weight of `kind` in one allocation, and the row scales of one-byte
// weights (shared by the copies). 16-bit weights in [-scale16, scale16); int8 values in [-127,
// 127); E4M3 codes: the bytes of int8 values in [-100, 100), but for 0xff (-1, a NaN code:
// replaced by 0; the other NaN, 0x7f, is 127).
template <typename T>
struct BenchWeights {
  Weights kind;
  int N, K, copies;
  void* p = nullptr;
  float* q_scale = nullptr;

  BenchWeights(Weights kind, int N, int K, int copies, uint32_t seed, float scale16 = 1.0f)
      : kind(kind), N(N), K(K), copies(copies) {
    const size_t n = size_t(N) * K * copies;
    if (kind == Weights::k16Bit) {
      p = lmx::bench::alloc_random<T>(n, seed, g_stream, scale16);
      return;
    }
    int8_t* q = lmx::bench::alloc_random<int8_t>(n, seed, g_stream,
                                                 kind == Weights::kInt8 ? 127.0f : 100.0f);
    if (kind == Weights::kE4M3) lmx::bench::replace_byte(q, n, int8_t(-1), int8_t(0), g_stream);
    p = q;
    q_scale = lmx::bench::alloc_random<float>(size_t(N), 61u, g_stream, 1e-3f);
  }
  BenchWeights(const BenchWeights&) = delete;
  BenchWeights& operator=(const BenchWeights&) = delete;
  ~BenchWeights() { cudaFree(p), cudaFree(q_scale); }

  size_t bytes() const {  // of one copy
    return size_t(N) * K * (kind == Weights::k16Bit ? sizeof(T) : 1);
  }
  // Copy i % copies as the kernels take it.
  lmx::kernels::LinearWeights<T> copy(int i) const {
    const size_t at = size_t(i % copies) * size_t(N) * K;
    if (kind == Weights::k16Bit) return {static_cast<const T*>(p) + at, nullptr, N, K};
    return {nullptr,
            nullptr,
            N,
            K,
            static_cast<const int8_t*>(p) + at,
            q_scale,
            kind == Weights::kE4M3};
  }
};

template <typename T>
void run_shape(const Shape& s, Weights kind, double ceiling) {
  const bool bytes_a_weight = kind != Weights::k16Bit;
  const size_t bytes = size_t(s.N) * s.K * (bytes_a_weight ? 1 : sizeof(T));
  const int copies = int(std::max<size_t>(4, (kMinRotationBytes + bytes - 1) / bytes));
  const BenchWeights<T> w(kind, s.N, s.K, copies, 1234u + uint32_t(s.N));
  T* x = lmx::bench::alloc_random<T>(size_t(k::kSkinnyMaxRows) * s.K, 77u, g_stream);
  const size_t out = size_t(k::kSkinnyMaxRows) * s.N;
  T *y_ref = nullptr, *y = nullptr;
  float *y32_ref = nullptr, *y32 = nullptr;
  CHECK(cudaMalloc(&y_ref, out * sizeof(T)));
  CHECK(cudaMalloc(&y, out * sizeof(T)));
  CHECK(cudaMalloc(&y32_ref, out * sizeof(float)));
  CHECK(cudaMalloc(&y32, out * sizeof(float)));
  k::GemmContext ctx;
  k::ByteWeightGemm byte_gemm;
  for (int M : g_rows) {
    auto reference = [&](int i) {  // cuBLAS, or the W8A16 GEMM for one-byte weights
      if (bytes_a_weight) {
        if (s.f32_out)
          byte_gemm.run<T, float>(x, w.copy(i), y32_ref, M, g_stream);
        else
          byte_gemm.run<T, T>(x, w.copy(i), y_ref, M, g_stream);
      } else if (s.f32_out) {
        k::linear_f32_out<T>(ctx, x, w.copy(i), y32_ref, M, g_stream);
      } else {
        k::linear<T>(ctx, x, w.copy(i), y_ref, M, g_stream);
      }
    };
    auto skinny = [&](int i) {
      if (g_norm && !s.f32_out)
        k::skinny_linear_norm<T>(x, k::InputNorm{1e-5f}, w.copy(i), y, M, g_stream);
      else if (s.f32_out)
        k::skinny_linear_f32_out<T>(x, w.copy(i), y32, M, g_stream);
      else
        k::skinny_linear<T>(x, w.copy(i), y, M, g_stream);
    };
    const double t_ref = time_us(reference, copies), t_skinny = time_us(skinny, copies);
    reference(0);
    skinny(0);
    CHECK(cudaStreamSynchronize(g_stream));
    const size_t n = size_t(M) * s.N;
    // (Not comparable with a normalized input: the reference multiplies x as it is.)
    const double diff = s.f32_out ? rel_diff(y32, y32_ref, n)
                        : g_norm  ? NAN
                                  : rel_diff(y, y_ref, n);
    const double g_ref = bytes / (t_ref * 1e3), g_skinny = bytes / (t_skinny * 1e3);
    std::printf("%-8s %6d %6d %2d %7.1f | %8.2f %7.0f | %8.2f %7.0f %5.1f%% | %5.2fx | %.1e\n",
                s.name, s.N, s.K, M, bytes / 1e6, t_ref, g_ref, t_skinny, g_skinny,
                100.0 * g_skinny / ceiling, t_ref / t_skinny, diff);
    std::fflush(stdout);
  }
  cudaFree(x);
  cudaFree(y_ref), cudaFree(y), cudaFree(y32_ref), cudaFree(y32);
}

// A Llama-2-7B decode layer's four GEMVs as the fused decode runs them (qkv with the normalized
// input, o adding to the residual, gate/up normalized and gated, down adding to the residual),
// layer after layer over rotating weight copies, in one graph: microseconds a layer. The gap to
// the four shapes' separate times is what the kernel boundaries cost.
template <typename T>
void run_chain(Weights kind, double ceiling) {
  const Shape* layer[4] = {&kShapes[0], &kShapes[1], &kShapes[2], &kShapes[3]};
  const size_t elem = kind == Weights::k16Bit ? sizeof(T) : 1;
  size_t layer_bytes = 0;
  for (const Shape* s : layer) layer_bytes += size_t(s->N) * s->K * elem;
  const int copies = int(std::max<size_t>(2, (kMinRotationBytes + layer_bytes - 1) / layer_bytes));
  std::vector<std::unique_ptr<BenchWeights<T>>> w;
  for (int j = 0; j < 4; ++j)
    w.push_back(std::make_unique<BenchWeights<T>>(kind, layer[j]->N, layer[j]->K, copies,
                                                  999u + uint32_t(j * 16), 0.05f));
  T* x = lmx::bench::alloc_random<T>(size_t(k::kSkinnyMaxRows) * 11008, 77u, g_stream);
  T *y = nullptr,
    *residual = lmx::bench::alloc_random<T>(size_t(k::kSkinnyMaxRows) * 4096, 5u, g_stream);
  CHECK(cudaMalloc(&y, size_t(k::kSkinnyMaxRows) * 22016 * sizeof(T)));
  const k::InputNorm rms{1e-5f};
  for (int M : g_rows) {
    auto call = [&](int i) {  // projection i % 4 of layer i / 4 (weight copy layer % copies)
      const int j = i % 4;
      const auto wv = w[size_t(j)]->copy(i / 4);
      switch (j) {
        case 0:
          k::skinny_linear_norm<T>(x, rms, wv, y, M, g_stream);
          break;
        case 1:
          k::skinny_linear_add<T>(x, wv, residual, M, g_stream);
          break;
        case 2:
          k::skinny_linear_norm_gated<T>(lmx::kernels::ActivationKind::Silu, x, rms, wv, y, M,
                                         g_stream);
          break;
        default:
          k::skinny_linear_add<T>(x, wv, residual, M, g_stream);
          break;
      }
    };
    const double us = 4 * time_us(call, 4 * copies);
    std::printf("chain  M=%d | %8.2f us a layer  %7.0f GB/s  %5.1f%%\n", M, us,
                layer_bytes / (us * 1e3), 100.0 * layer_bytes / (us * 1e3) / ceiling);
    std::fflush(stdout);
  }
  cudaFree(x), cudaFree(y), cudaFree(residual);
}

// Prefill-sized GEMMs (cuBLAS only: the skinny kernel takes <= 8 rows) at M rows: TFLOP/s =
// 2 M N K / time. Weights rotate as in the decode table (they matter less: the product is
// compute-bound).
template <typename T>
void run_prefill_shape(const Shape& s, int M) {
  const size_t elems = size_t(s.N) * s.K, bytes = elems * sizeof(T);
  const int copies = int(std::max<size_t>(2, (kMinRotationBytes + bytes - 1) / bytes));
  T* w = lmx::bench::alloc_random<T>(elems * copies, 4321u + uint32_t(s.N), g_stream);
  T* x = lmx::bench::alloc_random<T>(size_t(M) * s.K, 78u, g_stream);
  T* y = nullptr;
  float* y32 = nullptr;
  CHECK(cudaMalloc(&y, size_t(M) * s.N * sizeof(T)));
  CHECK(cudaMalloc(&y32, size_t(M) * s.N * sizeof(float)));
  k::GemmContext ctx;
  auto cublas = [&](int i) {
    const lmx::kernels::LinearWeights<T> wi{w + size_t(i % copies) * elems, nullptr, s.N, s.K};
    if (s.f32_out)
      k::linear_f32_out<T>(ctx, x, wi, y32, M, g_stream);
    else
      k::linear<T>(ctx, x, wi, y, M, g_stream);
  };
  const double us = time_us(cublas, copies);
  const double tflops = 2.0 * M * s.N * s.K / (us * 1e6);
  std::printf("%-8s %6d %6d %5d | %9.1f us %7.1f TFLOP/s\n", s.name, s.N, s.K, M, us, tflops);
  std::fflush(stdout);
  cudaFree(w), cudaFree(x), cudaFree(y), cudaFree(y32);
}

}  // namespace

int main(int argc, char** argv) {
  bool bf16 = false, prefill = false;
  Weights kind = Weights::k16Bit;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) {
      g_iters = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) {
      const char* d = argv[++i];
      if (std::strcmp(d, "fp16") && std::strcmp(d, "bf16")) {
        std::fprintf(stderr, "--dtype: fp16 or bf16, not %s\n", d);
        return 2;
      }
      bf16 = !std::strcmp(d, "bf16");
    } else if (!std::strcmp(argv[i], "--graph")) {
      g_graph = true;
    } else if (!std::strcmp(argv[i], "--prefill")) {
      prefill = true;
    } else if (!std::strcmp(argv[i], "--chain")) {
      g_chain = true;
    } else if (!std::strcmp(argv[i], "--norm")) {
      g_norm = true;
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      g_shape = argv[++i];
      if (std::none_of(std::begin(kShapes), std::end(kShapes),
                       [](const Shape& s) { return !std::strcmp(s.name, g_shape); })) {
        std::fprintf(stderr, "--shape: qkv, o_proj, gate_up, down or lm_head, not %s\n", g_shape);
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) {
      g_rows.clear();
      for (const char* p = argv[++i]; *p;) {
        char* end = nullptr;
        const long M = std::strtol(p, &end, 10);
        if (end == p || M < 1 || M > k::kSkinnyMaxRows || (*end && *end != ',')) {
          std::fprintf(stderr, "--rows: comma-separated counts in 1..%d, not %s\n",
                       k::kSkinnyMaxRows, argv[i]);
          return 2;
        }
        g_rows.push_back(int(M));
        p = *end ? end + 1 : end;
      }
    } else if (!std::strcmp(argv[i], "--weights") && i + 1 < argc) {
      const char* v = argv[++i];
      if (!std::strcmp(v, "16bit")) {
        kind = Weights::k16Bit;
      } else if (!std::strcmp(v, "int8")) {
        kind = Weights::kInt8;
      } else if (!std::strcmp(v, "fp8")) {
        kind = Weights::kE4M3;
      } else {
        std::fprintf(stderr, "--weights: 16bit, int8 or fp8, not %s\n", v);
        return 2;
      }
    } else {
      std::fprintf(
          stderr,
          "usage: lmx_bench_gemv [--iters N] [--dtype fp16|bf16] [--graph] [--prefill] "
          "[--weights 16bit|int8|fp8] [--shape NAME] [--rows M,M,..] [--norm] [--chain]\n");
      return 2;
    }
  }
  if (prefill && kind != Weights::k16Bit) {
    std::fprintf(stderr, "--prefill times cuBLAS on 16-bit weights: no --weights with it\n");
    return 2;
  }
  CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const double ceiling = read_ceiling_gbs();
  std::printf(
      "device: %s, %d SMs; streaming read of 1 GiB: %.0f GB/s; dtype %s; weights %s; %d calls a "
      "timing, %s; weights rotate over >= 4 copies (>= 256 MB)\n",
      prop.name, prop.multiProcessorCount, ceiling, bf16 ? "bf16" : "fp16",
      kind == Weights::k16Bit  ? "16-bit"
      : kind == Weights::kInt8 ? "int8"
                               : "E4M3",
      g_iters, g_graph ? "one CUDA graph" : "stream launches");
  if (g_chain) {
    if (bf16)
      run_chain<__nv_bfloat16>(kind, ceiling);
    else
      run_chain<__half>(kind, ceiling);
  } else if (prefill) {  // the prompt-sized products, through cuBLAS
    std::printf("%-8s %6s %6s %5s | cuBLAS\n", "shape", "N", "K", "M");
    for (int M : {512, 4096})
      for (const Shape& s : kShapes) {
        if (bf16)
          run_prefill_shape<__nv_bfloat16>(s, M);
        else
          run_prefill_shape<__half>(s, M);
      }
  } else {  // decode-sized products, cuBLAS against the skinny kernel
    std::printf("%-8s %6s %6s %2s %7s | %8s %7s | %8s %7s %6s | %6s | %s\n", "shape", "N", "K", "M",
                "MB", kind == Weights::k16Bit ? "cuBLAS" : "W8A16", "GB/s", "skinny", "GB/s",
                "%read", "speed", "max rel diff");
    for (const Shape& s : kShapes) {
      if (g_shape && std::strcmp(g_shape, s.name)) continue;
      if (bf16)
        run_shape<__nv_bfloat16>(s, kind, ceiling);
      else
        run_shape<__half>(s, kind, ceiling);
    }
  }
  CHECK(cudaStreamDestroy(g_stream));
  return 0;
}
