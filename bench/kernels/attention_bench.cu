// Attention microbenchmark (kernels/attention.h), Llama-2-7B attention shape: 32 heads, 32 kv
// heads, head_dim 128, block_size 16, scrambled block tables.
//   decode:  GB/s = bytes of K and V read (context x kv_heads x head_dim x 2 x sizeof(T)) / time,
//            batch 1 x 512, 1 x 8192, 32 x 512, 8 x 4096, 64 x 1024 context; against the measured
//            D2D copy bandwidth (read + write) of this device; plus GQA 32 / 8 kv heads
//            (Llama-3-8B) at batch 1 x 8192 and 32 x 2048. "graph": the same call captured
//            20 times in a CUDA graph, time per call (as in the engine's captured decode step,
//            without the host launch cost that dominates a single short call).
//   prefill: TFLOP/s = causal FLOPs (2 * 2 * heads * head_dim * n^2 / 2) / time, for one
//            n-token prompt (n = 512, 4096) read back from the paged cache; against ~790 TFLOP/s
//            (bf16 dense matmul measured on the H100 of the device machine).
// Times: CUDA events, 5 warm-up runs, median of 50.
// Usage: lmx_bench_attention
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "bench/kernels/cuda_check.h"
#include "kernels/attention.h"

namespace {

constexpr int kHeads = 32, kKvHeads = 32, kDim = 128, kBlock = 16;

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

__global__ void fill_kernel(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    // a finite value in [-1, 1) of both fp16 and bf16 layouts: small exponent, random mantissa
    p[i] = uint16_t((x & 0x8000u) | 0x3800u | (x & 0x03ffu));
  }
}

template <typename T>
T* alloc_random(size_t n, uint32_t seed) {
  T* p;
  CHECK(cudaMalloc(&p, n * sizeof(T)));
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
Cache make_cache(int seqs, int len, std::mt19937& rng, int kv_heads = kKvHeads) {
  Cache c;
  const int per = (len + kBlock - 1) / kBlock;
  c.layout = {kBlock, kv_heads, kDim, per};
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

// kv_heads: 32 (MHA, the Llama-2-7B shape) or fewer (GQA, e.g. 8 as in Llama-3-8B).
template <typename T>
void bench_decode(const char* dtype, int batch, int ctx, double copy_gbs, int kv_heads = kKvHeads) {
  std::mt19937 rng(batch * 7 + ctx);
  Cache c = make_cache(batch, ctx, rng, kv_heads);
  const size_t elems = c.tables.size() * kBlock * size_t(kv_heads) * kDim;
  T* k = alloc_random<T>(elems, 1);
  T* v = alloc_random<T>(elems, 2);
  const int q_stride = (kHeads + 2 * kv_heads) * kDim;
  T* q = alloc_random<T>(size_t(batch) * q_stride, 3);
  T* out;
  CHECK(cudaMalloc(&out, size_t(batch) * kHeads * kDim * sizeof(T)));
  std::vector<int32_t> seq(batch), pos(batch, ctx - 1);
  std::iota(seq.begin(), seq.end(), 0);
  int32_t *dt = upload(c.tables), *ds = upload(seq), *dp = upload(pos);
  const size_t ws_bytes = lmx::kernels::cuda::paged_attention_decode_workspace_bytes(
      batch, kHeads, kv_heads, kDim, ctx);
  void* ws = nullptr;
  if (ws_bytes) CHECK(cudaMalloc(&ws, ws_bytes));
  const float scale = 1.0f / std::sqrt(float(kDim));
  auto call = [&](cudaStream_t stream) {
    lmx::kernels::cuda::paged_attention_decode<T>(q, q_stride, k, v, dt, ds, dp, out, batch, kHeads,
                                                  scale, 0, c.layout, ctx, ws, ws_bytes, stream);
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
  const double bytes = 2.0 * batch * ctx * kv_heads * kDim * sizeof(T);
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf(
      "decode   %-5s kv %2d batch %3d x ctx %5d   %8.1f us   %7.1f GB/s  (%.0f%% of copy %.0f "
      "GB/s)  graph %6.1f us %7.1f GB/s\n",
      dtype, kv_heads, batch, ctx, ms * 1e3, gbs, 100.0 * gbs / copy_gbs, copy_gbs, graph_ms * 1e3,
      bytes / (graph_ms * 1e-3) / 1e9);
  cudaFree(k);
  cudaFree(v);
  cudaFree(q);
  cudaFree(out);
  cudaFree(dt);
  cudaFree(ds);
  cudaFree(dp);
  cudaFree(ws);
}

template <typename T>
void bench_prefill(const char* dtype, int n) {
  std::mt19937 rng(n);
  Cache c = make_cache(1, n, rng);
  const size_t elems = c.tables.size() * kBlock * size_t(kKvHeads) * kDim;
  T* k = alloc_random<T>(elems, 4);
  T* v = alloc_random<T>(elems, 5);
  const int q_stride = (kHeads + 2 * kKvHeads) * kDim;
  T* q = alloc_random<T>(size_t(n) * q_stride, 6);
  T* out;
  CHECK(cudaMalloc(&out, size_t(n) * kHeads * kDim * sizeof(T)));
  std::vector<int32_t> seq(n, 0), pos(n), cu{0, n};
  std::iota(pos.begin(), pos.end(), 0);
  int32_t *dt = upload(c.tables), *ds = upload(seq), *dp = upload(pos), *dc = upload(cu);
  const float scale = 1.0f / std::sqrt(float(kDim));
  const float ms = median_ms([&] {
    lmx::kernels::cuda::paged_attention_prefill<T>(q, q_stride, k, v, dt, ds, dp, dc, 1, n, out,
                                                   kHeads, scale, 0, c.layout, nullptr);
  });
  const double flops = 2.0 * 2.0 * kHeads * kDim * double(n) * n / 2.0;
  const double tflops = flops / (ms * 1e-3) / 1e12;
  std::printf("prefill  %-5s %5d tokens             %8.1f us   %7.1f TFLOP/s (%.0f%% of 790)\n",
              dtype, n, ms * 1e3, tflops, 100.0 * tflops / 790.0);
  cudaFree(k);
  cudaFree(v);
  cudaFree(q);
  cudaFree(out);
  cudaFree(dt);
  cudaFree(ds);
  cudaFree(dp);
  cudaFree(dc);
}

}  // namespace

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "no CUDA GPU: run on the device machine\n");
    return 1;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs; shape: %d heads / %d kv heads, head_dim %d, block %d\n",
              prop.name, prop.multiProcessorCount, kHeads, kKvHeads, kDim, kBlock);
  const double copy = copy_bandwidth_gbs();
  for (auto [b, ctx] : {std::pair{1, 512}, {1, 8192}, {32, 512}, {8, 4096}, {64, 1024}}) {
    bench_decode<__half>("fp16", b, ctx, copy);
    bench_decode<__nv_bfloat16>("bf16", b, ctx, copy);
  }
  for (auto [b, ctx] : {std::pair{1, 8192}, {32, 2048}}) {  // GQA 32/8 (decode_kernel)
    bench_decode<__half>("fp16", b, ctx, copy, 8);
    bench_decode<__nv_bfloat16>("bf16", b, ctx, copy, 8);
  }
  for (int len : {512, 4096}) {
    bench_prefill<__half>("fp16", len);
    bench_prefill<__nv_bfloat16>("bf16", len);
  }
  return 0;
}
