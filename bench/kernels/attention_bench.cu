// Attention microbenchmark (kernels/attention.h), Llama-2-7B attention shape: 32 heads, 32 kv
// heads, head_dim 128, block_size 16, scrambled block tables. Then ALiBi (Bloom-7b1: that shape
// with slopes; decode 1 x 8192, 32 x 512, GQA 32 / 8 at 32 x 2048, fp16; prefill 512, 4096) to
// compare with the same rows without it, and head_dim 256 (GPT-J-6B: 16 / 16 heads; decode
// 1 x 512, 1 x 8192, 32 x 512, 8 x 4096, GQA 16 / 4 at 32 x 2048; prefill 512, 4096).
//   decode:  GB/s = bytes of K and V read (context x kv_heads x head_dim x 2 x sizeof(T)) / time,
//            batch 1 x 512, 1 x 8192, 32 x 512, 8 x 4096, 64 x 1024 context, and 1 x 520 planned
//            for 1024 (as a decode graph plans it, Llama and GPT-J shapes); against the measured
//            D2D copy bandwidth (read + write) of this device; plus GQA 32 / 8 kv heads
//            (Llama-3-8B) at batch 1 x 8192 and 32 x 2048. "graph": the same call captured
//            20 times in a CUDA graph, time per call (as in the engine's captured decode step,
//            without the host launch cost that dominates a single short call).
//   prefill: TFLOP/s = causal FLOPs (2 * 2 * heads * head_dim * n^2 / 2) / time, for one
//            n-token prompt (n = 512, 4096) read back from the paged cache; against ~790 TFLOP/s
//            (bf16 dense matmul measured on the H100 of the device machine).
//   --gqa-sweep: only grouped-KV decode (issue 26): 4 and 8 query heads per kv head (32 / 8 and
//            32 / 4), head_dim 64 and 128, contexts 2048 and 8192, batches 32, 256 and 512, over
//            fp16, bf16 and fp8 (E4M3, fp16 queries) caches.
//   --prefill: only prefill, 512 and 4096 tokens, fp16 and bf16, the Llama-2-7B shape, GQA
//            32 / 8 (Llama-3-8B; also over an fp8 cache), head_dim 64 (32 / 32) and ALiBi; each by
//            the kernel paged_attention_prefill picks on this GPU and by the mma.sync kernel
//            ("mma.sync").
// Times: CUDA events, 5 warm-up runs, median of 50.
// Usage: lmx_bench_attention [--gqa-sweep | --prefill]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/cuda_check.h"
#include "kernels/attention.h"

namespace {

constexpr int kBlock = 16;

// Attention shape of a benchmark case; the default is Llama-2-7B's.
struct Shape {
  int heads = 32, kv_heads = 32, dim = 128;
  bool alibi = false;  // slopes 2^(-8 (h + 1) / heads) (Bloom's, for a power-of-two head count)
};

template <typename F>
float median_ms(F&& f, int reps = 50) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  CHECK(cudaGetLastError());
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a));
    f();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms[i], a, b));
  }
  CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

// A hash of element i: the random bits of the fills below.
__device__ uint32_t element_bits(size_t i, uint32_t seed) {
  uint32_t x = uint32_t(i) * 2654435761u ^ seed;
  x ^= x >> 15;
  x *= 2246822519u;
  return x ^ (x >> 13);
}

__global__ void fill_kernel(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t x = element_bits(i, seed);
    // a finite value in [-1, 1) of both fp16 and bf16 layouts: small exponent, random mantissa
    p[i] = uint16_t((x & 0x8000u) | 0x3800u | (x & 0x03ffu));
  }
}

// E4M3 codes of values in +-[0.5, 1) (no NaN code).
__global__ void fill_fp8_kernel(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    p[i] = uint8_t((element_bits(i, seed) & 0x87u) | 0x30u);
  }
}

template <typename T>
T* alloc_random(size_t n, uint32_t seed) {
  T* p;
  CHECK(cudaMalloc(&p, n * sizeof(T)));
  if constexpr (sizeof(T) == 1)
    fill_fp8_kernel<<<1024, 256>>>(reinterpret_cast<uint8_t*>(p), n, seed);
  else
    fill_kernel<<<1024, 256>>>(reinterpret_cast<uint16_t*>(p), n, seed);
  CHECK(cudaGetLastError());
  return p;
}

int32_t* upload(const std::vector<int32_t>& v) {
  int32_t* p;
  CHECK(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * 4));
  CHECK(cudaMemcpy(p, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  return p;
}

struct Cache {
  lmx::kernels::PagedKvLayout layout{};
  std::vector<int32_t> tables;
};

// `seqs` sequences of `len` positions each, blocks scrambled over the cache.
Cache make_cache(int seqs, int len, std::mt19937& rng, const Shape& s) {
  Cache c;
  const int per = (len + kBlock - 1) / kBlock;
  c.layout = {kBlock, s.kv_heads, s.dim, per};
  std::vector<int32_t> perm(size_t(seqs) * per);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  c.tables = perm;
  return c;
}

double copy_bandwidth_gbs() {
  const size_t bytes = size_t(1) << 30;
  void *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemset(a, 1, bytes));
  const float ms =
      median_ms([&] { CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }, 20);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

// Device copy of the slopes of s (nullptr without ALiBi); free with cudaFree.
float* alibi_slopes(const Shape& s) {
  if (!s.alibi) return nullptr;
  std::vector<float> h(size_t(s.heads));
  for (int i = 0; i < s.heads; ++i) h[size_t(i)] = std::exp2(-8.0f * float(i + 1) / float(s.heads));
  float* p;
  CHECK(cudaMalloc(&p, h.size() * sizeof(float)));
  CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

// "h32/32 d128" and " alibi" when on.
std::string label(const Shape& s) {
  return "h" + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " d" +
         std::to_string(s.dim) + (s.alibi ? " alibi" : "");
}

// Shape s: Llama-2-7B (MHA) by default, or GQA (e.g. 32 / 8 as Llama-3-8B), ALiBi, head_dim 256.
// C: the cache's element type (T, or E4M3 bytes with T queries). planned: the max_context the
// launch plans its splits for (0: ctx; the engine's decode graphs plan for ctx rounded up to a
// power of two).
template <typename T, typename C = T>
void bench_decode(const char* dtype, int batch, int ctx, double copy_gbs, const Shape& s = {},
                  int planned = 0) {
  if (planned == 0) planned = ctx;
  std::mt19937 rng(batch * 7 + ctx);
  Cache c = make_cache(batch, planned, rng, s);
  const size_t elems = c.tables.size() * kBlock * size_t(s.kv_heads) * s.dim;
  C* k = alloc_random<C>(elems, 1);
  C* v = alloc_random<C>(elems, 2);
  const int q_stride = (s.heads + 2 * s.kv_heads) * s.dim;
  T* q = alloc_random<T>(size_t(batch) * q_stride, 3);
  T* out;
  CHECK(cudaMalloc(&out, size_t(batch) * s.heads * s.dim * sizeof(T)));
  std::vector<int32_t> seq(batch), pos(batch, ctx - 1);
  std::iota(seq.begin(), seq.end(), 0);
  int32_t *dt = upload(c.tables), *ds = upload(seq), *dp = upload(pos);
  float* slopes = alibi_slopes(s);
  const size_t ws_bytes = lmx::kernels::cuda::paged_attention_decode_workspace_bytes(
      batch, s.heads, s.kv_heads, s.dim, planned);
  void* ws = nullptr;
  if (ws_bytes) CHECK(cudaMalloc(&ws, ws_bytes));
  const float scale = 1.0f / std::sqrt(float(s.dim));
  auto call = [&](cudaStream_t stream) {
    lmx::kernels::cuda::paged_attention_decode<T, C>(q, q_stride, k, v, dt, ds, dp, out, batch,
                                                     s.heads, scale, slopes, 0, c.layout, planned, ws,
                                                     ws_bytes, stream);
  };
  const float ms = median_ms([&] { call(nullptr); });
  constexpr int kGraphCalls = 20;
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));  // as the engine
  for (int i = 0; i < kGraphCalls; ++i) call(stream);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const float graph_ms =
      median_ms([&] { CHECK(cudaGraphLaunch(exec, nullptr)); }, 20) / kGraphCalls;
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(stream));
  const double bytes = 2.0 * batch * ctx * s.kv_heads * s.dim * sizeof(C);
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf(
      "decode   %-5s %-18s batch %3d x ctx %5d%s   %8.1f us   %7.1f GB/s  (%.0f%% of copy %.0f "
      "GB/s)  graph %6.1f us %7.1f GB/s\n",
      dtype, label(s).c_str(), batch, ctx,
      planned == ctx ? "" : (" (plan " + std::to_string(planned) + ")").c_str(), ms * 1e3, gbs,
      100.0 * gbs / copy_gbs, copy_gbs, graph_ms * 1e3, bytes / (graph_ms * 1e-3) / 1e9);
  cudaFree(k);
  cudaFree(v);
  cudaFree(q);
  cudaFree(out);
  cudaFree(dt);
  cudaFree(ds);
  cudaFree(dp);
  cudaFree(ws);
  cudaFree(slopes);
}

using lmx::kernels::cuda::PrefillKernel;

template <typename T, typename C = T>
void bench_prefill(const char* dtype, int n, const Shape& s = {},
                   PrefillKernel kernel = PrefillKernel::kBest) {
  std::mt19937 rng(n);
  Cache c = make_cache(1, n, rng, s);
  const size_t elems = c.tables.size() * kBlock * size_t(s.kv_heads) * s.dim;
  C* k = alloc_random<C>(elems, 4);
  C* v = alloc_random<C>(elems, 5);
  const int q_stride = (s.heads + 2 * s.kv_heads) * s.dim;
  T* q = alloc_random<T>(size_t(n) * q_stride, 6);
  T* out;
  CHECK(cudaMalloc(&out, size_t(n) * s.heads * s.dim * sizeof(T)));
  std::vector<int32_t> seq(n, 0), pos(n), cu{0, n};
  std::iota(pos.begin(), pos.end(), 0);
  int32_t *dt = upload(c.tables), *ds = upload(seq), *dp = upload(pos), *dc = upload(cu);
  float* slopes = alibi_slopes(s);
  const float scale = 1.0f / std::sqrt(float(s.dim));
  const float ms = median_ms([&] {
    lmx::kernels::cuda::paged_attention_prefill<T>(q, q_stride, k, v, dt, ds, dp, dc, 1, n, out,
                                                   s.heads, scale, slopes, 0, c.layout, nullptr,
                                                   kernel);
  });
  const double flops = 2.0 * 2.0 * s.heads * s.dim * double(n) * n / 2.0;
  const double tflops = flops / (ms * 1e-3) / 1e12;
  const bool mma_sync = kernel == PrefillKernel::kMmaSync;
  std::printf("prefill  %-5s %-18s %5d tokens  %8.1f us   %7.1f TFLOP/s (%.0f%% of 790)%s\n", dtype,
              label(s).c_str(), n, ms * 1e3, tflops, 100.0 * tflops / 790.0,
              mma_sync ? "  mma.sync" : "");
  cudaFree(k);
  cudaFree(v);
  cudaFree(q);
  cudaFree(out);
  cudaFree(dt);
  cudaFree(ds);
  cudaFree(dp);
  cudaFree(dc);
  cudaFree(slopes);
}

}  // namespace

// Grouped-KV decode over the issue's grid (--gqa-sweep).
void gqa_sweep(double copy) {
  for (const Shape s : {Shape{32, 8, 128}, Shape{32, 4, 128}, Shape{32, 8, 64}, Shape{32, 4, 64}})
    for (int ctx : {2048, 8192})
      for (int batch : {32, 256, 512}) {
        bench_decode<__half>("fp16", batch, ctx, copy, s);
        bench_decode<__nv_bfloat16>("bf16", batch, ctx, copy, s);
        bench_decode<__half, __nv_fp8_e4m3>("fp8", batch, ctx, copy, s);
      }
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool sweep = mode == "--gqa-sweep", prefill_only = mode == "--prefill";
  if (argc > 2 || (argc > 1 && !sweep && !prefill_only)) {
    std::fprintf(stderr, "usage: lmx_bench_attention [--gqa-sweep | --prefill]\n");
    return 2;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "no CUDA GPU: run on the device machine\n");
    return 1;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const Shape llama;
  std::printf("device: %s, %d SMs; shape: %d heads / %d kv heads, head_dim %d, block %d\n",
              prop.name, prop.multiProcessorCount, llama.heads, llama.kv_heads, llama.dim, kBlock);
  const double copy = copy_bandwidth_gbs();
  if (sweep) {
    gqa_sweep(copy);
    return 0;
  }
  if (prefill_only) {
    const Shape shapes[] = {llama, Shape{32, 8, 128}, Shape{32, 32, 64}, Shape{32, 32, 128, true}};
    for (const Shape& shape : shapes)
      for (int len : {512, 4096})
        for (PrefillKernel kernel : {PrefillKernel::kMmaSync, PrefillKernel::kBest}) {
          bench_prefill<__half>("fp16", len, shape, kernel);
          bench_prefill<__nv_bfloat16>("bf16", len, shape, kernel);
        }
    for (int len : {512, 4096})  // Llama-3-8B over an fp8 cache (bf16 queries)
      for (PrefillKernel kernel : {PrefillKernel::kMmaSync, PrefillKernel::kBest})
        bench_prefill<__nv_bfloat16, __nv_fp8_e4m3>("fp8", len, Shape{32, 8, 128}, kernel);
    return 0;
  }
  for (auto [b, ctx] : {std::pair{1, 512}, {1, 8192}, {32, 512}, {8, 4096}, {64, 1024}}) {
    bench_decode<__half>("fp16", b, ctx, copy);
    bench_decode<__nv_bfloat16>("bf16", b, ctx, copy);
  }
  bench_decode<__half>("fp16", 1, 520, copy, {}, 1024);  // a decode graph's plan
  const Shape gqa{32, 8, 128};  // Llama-3-8B (decode_kernel)
  for (auto [b, ctx] : {std::pair{1, 8192}, {32, 2048}}) {
    bench_decode<__half>("fp16", b, ctx, copy, gqa);
    bench_decode<__nv_bfloat16>("bf16", b, ctx, copy, gqa);
  }
  for (int len : {512, 4096}) {
    bench_prefill<__half>("fp16", len);
    bench_prefill<__nv_bfloat16>("bf16", len);
  }
  // ALiBi (Bloom-7b1: the Llama-2-7B shape with slopes): its cost against the rows above.
  const Shape bloom{32, 32, 128, true};
  for (auto [b, ctx] : {std::pair{1, 8192}, {32, 512}})
    bench_decode<__half>("fp16", b, ctx, copy, bloom);
  bench_decode<__half>("fp16", 32, 2048, copy, {32, 8, 128, true});
  for (int len : {512, 4096}) bench_prefill<__half>("fp16", len, bloom);
  // head_dim 256 (GPT-J-6B 16 / 16; Gemma-7B has the same attention shape).
  const Shape gptj{16, 16, 256};
  for (auto [b, ctx] : {std::pair{1, 512}, {1, 8192}, {32, 512}, {8, 4096}}) {
    bench_decode<__half>("fp16", b, ctx, copy, gptj);
    bench_decode<__nv_bfloat16>("bf16", b, ctx, copy, gptj);
  }
  bench_decode<__half>("fp16", 1, 520, copy, gptj, 1024);  // a decode graph's plan
  bench_decode<__half>("fp16", 32, 2048, copy, {16, 4, 256});  // GQA group 4 (decode_kernel)
  for (int len : {512, 4096}) {
    bench_prefill<__half>("fp16", len, gptj);
    bench_prefill<__nv_bfloat16>("bf16", len, gptj);
  }
  return 0;
}
