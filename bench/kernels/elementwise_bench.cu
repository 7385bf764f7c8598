// Microbenchmark of the memory-bound row / element-wise kernels (embedding, add+norm, activation,
// bias add, rope + KV write, row gather, sampling) at Llama-2-7B shapes.
// Reports time per call and achieved bandwidth (bytes read + written, counted once) against the
// H100's measured device copy bandwidth, 3.0 TB/s (read + write).
// Usage: lmx_bench_elementwise [iterations=200]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "kernels/activation.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/norm.h"
#include "kernels/rope_kv.h"
#include "kernels/sampling.h"

namespace k = lmx::kernels;
using T = __nv_bfloat16;

namespace {

constexpr double kCopyGBs = 3000.0;  // H100 device copy, read + write (DESIGN.md)
double g_measured_copy = 0;          // this device's copy bandwidth, measured at start
int g_iters = 200;

template <typename U>
U* dev(size_t n, int fill_byte = 0) {
  U* p = nullptr;
  if (cudaMalloc(&p, n * sizeof(U)) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc failed\n");
    std::exit(1);
  }
  cudaMemset(p, fill_byte, n * sizeof(U));
  return p;
}

void bench(const char* name, double bytes, const std::function<void()>& f) {
  for (int i = 0; i < 5; ++i) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int i = 0; i < g_iters; ++i) f();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  const double us = 1e3 * ms / g_iters;
  const double gbs = bytes / (us * 1e3);
  const cudaError_t e = cudaGetLastError();
  std::printf("%-48s %10.2f us %9.1f GB/s %6.1f%% of 3.0 TB/s %6.1f%% of measured%s\n", name, us,
              gbs, 100.0 * gbs / kCopyGBs, 100.0 * gbs / g_measured_copy,
              e == cudaSuccess ? "" : "  CUDA ERROR");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

// Small values so nothing overflows: 0x3c00 = 1.0 in fp16, 0x3f80.. bf16 ~ 1 + x; fill bytes 0x3c.
T* devt(size_t n) { return dev<T>(n, 0x3c); }

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_iters = std::atoi(argv[1]);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  {  // device-to-device copy of 1 GiB: the ceiling, counting read + write
    const size_t bytes = size_t(1) << 30;
    char* a = dev<char>(bytes);
    char* b = dev<char>(bytes);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e0);
    for (int i = 0; i < 10; ++i) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    g_measured_copy = 2.0 * bytes * 10 / (ms * 1e6);
    cudaFree(a), cudaFree(b);
  }
  std::printf("device: %s; measured copy %.0f GB/s (read + write); dtype bf16 unless noted; %d "
              "iterations each; small sizes are launch-latency bound, large ones may hit L2\n",
              prop.name, g_measured_copy, g_iters);
  const int H = 4096, I = 11008, V = 32000, heads = 32, D = 128;
  const size_t e = sizeof(T);

  for (int tokens : {1, 32, 4096}) {
    char name[96];
    int32_t* ids = dev<int32_t>(tokens);  // random rows: no L2 reuse of one table row
    {
      std::vector<int32_t> h(tokens);
      for (int t = 0; t < tokens; ++t) h[t] = int32_t((uint64_t(t) * 2654435761u) % uint64_t(tokens));
      cudaMemcpy(ids, h.data(), tokens * 4, cudaMemcpyHostToDevice);
    }
    T* table = devt(size_t(V) * H);
    T* out = devt(size_t(tokens) * H);
    std::snprintf(name, sizeof name, "embedding          T=%-5d H=%d", tokens, H);
    bench(name, 2.0 * tokens * H * e,
          [&] { k::cuda::embedding<T>(ids, table, nullptr, nullptr, out, tokens, H, nullptr); });

    T* res = devt(size_t(tokens) * H);
    T* x = devt(size_t(tokens) * H);
    T* w = devt(H);
    std::snprintf(name, sizeof name, "add_rms_norm       T=%-5d H=%d", tokens, H);
    bench(name, 4.0 * tokens * H * e,
          [&] { k::cuda::add_rms_norm<T>(res, x, w, out, tokens, H, 1e-6f, nullptr); });
    std::snprintf(name, sizeof name, "add_layer_norm     T=%-5d H=%d", tokens, H);
    bench(name, 4.0 * tokens * H * e,
          [&] { k::cuda::add_layer_norm<T>(res, x, w, w, out, tokens, H, 1e-5f, nullptr); });
    std::snprintf(name, sizeof name, "add_rms_norm       T=%-5d H=5120", tokens);
    T* res5 = devt(size_t(tokens) * 5120);
    T* x5 = devt(size_t(tokens) * 5120);
    T* out5 = devt(size_t(tokens) * 5120);
    T* w5 = devt(5120);
    bench(name, 4.0 * tokens * 5120 * e,
          [&] { k::cuda::add_rms_norm<T>(res5, x5, w5, out5, tokens, 5120, 1e-6f, nullptr); });
    std::snprintf(name, sizeof name, "bias_add+residual  T=%-5d H=%d", tokens, H);
    bench(name, 3.0 * tokens * H * e,
          [&] { k::cuda::bias_add<T>(x, w, res, out, tokens, H, nullptr); });

    T* up = devt(size_t(tokens) * 2 * I);
    T* act = devt(size_t(tokens) * I);
    std::snprintf(name, sizeof name, "gated_act silu     T=%-5d I=%d", tokens, I);
    bench(name, 3.0 * tokens * I * e, [&] {
      k::cuda::gated_act<T>(k::ActivationKind::Silu, up, act, tokens, I, nullptr);
    });
    std::snprintf(name, sizeof name, "gated_act gelu_tanh T=%-5d I=%d", tokens, I);
    bench(name, 3.0 * tokens * I * e, [&] {
      k::cuda::gated_act<T>(k::ActivationKind::GeluTanh, up, act, tokens, I, nullptr);
    });

    // Rope + KV write, Llama-2-7B attention (32 heads, no GQA): q, k read+written, v read,
    // k and v written to the cache.
    const int qkv_w = 3 * heads * D, block_size = 16;
    const int blocks = (tokens + block_size - 1) / block_size;
    T* qkv = devt(size_t(tokens) * qkv_w);
    T* kc = devt(size_t(blocks) * block_size * heads * D);
    T* vc = devt(size_t(blocks) * block_size * heads * D);
    std::vector<int32_t> h_pos(tokens), h_tab(blocks);
    for (int t = 0; t < tokens; ++t) h_pos[t] = t;
    for (int b = 0; b < blocks; ++b) h_tab[b] = b;
    int32_t* pos = dev<int32_t>(tokens);
    int32_t* seq = dev<int32_t>(tokens);  // all sequence 0
    int32_t* tab = dev<int32_t>(blocks);
    cudaMemcpy(pos, h_pos.data(), tokens * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(tab, h_tab.data(), blocks * 4, cudaMemcpyHostToDevice);
    std::vector<float> h_freq(D / 2);
    for (int i = 0; i < D / 2; ++i) h_freq[i] = std::pow(10000.0f, -2.0f * i / D);
    float* freq = dev<float>(D / 2);
    cudaMemcpy(freq, h_freq.data(), D / 2 * 4, cudaMemcpyHostToDevice);
    const k::PagedKvLayout L{block_size, heads, D, blocks};
    std::snprintf(name, sizeof name, "rope_write_kv      T=%-5d 32x128", tokens);
    bench(name, double(tokens) * heads * D * e * 7, [&] {
      k::cuda::rope_write_kv<T>(qkv, qkv_w, nullptr, pos, freq, D, heads, kc, vc, tab, seq, tokens,
                                L, nullptr);
    });
    std::snprintf(name, sizeof name, "gather_rows        n=%-5d H=%d", tokens, H);
    bench(name, 2.0 * tokens * H * e,
          [&] { k::cuda::gather_rows<T>(x, ids, out, tokens, H, nullptr); });
    cudaFree(ids), cudaFree(table), cudaFree(out), cudaFree(res), cudaFree(x), cudaFree(w);
    cudaFree(res5), cudaFree(x5), cudaFree(out5), cudaFree(w5), cudaFree(up), cudaFree(act);
    cudaFree(qkv), cudaFree(kc), cudaFree(vc), cudaFree(pos), cudaFree(seq), cudaFree(tab);
    cudaFree(freq);
  }

  // Sampling over fp32 logits (bytes = one read of the logits; the kernel makes several passes,
  // mostly from L2).
  for (int n : {1, 32, 64}) {
    for (int vocab : {32000, 128256}) {
      for (int mode = 0; mode < 3; ++mode) {  // greedy; temperature only; top-k 50 + top-p 0.9
        float* logits = dev<float>(size_t(n) * vocab);
        std::vector<float> h(size_t(n) * vocab);
        for (size_t i = 0; i < h.size(); ++i) h[i] = float((i * 2654435761u) % 1000) * 0.01f;
        cudaMemcpy(logits, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
        std::vector<k::SamplingRow> hp(n);
        for (auto& p : hp) {
          p.greedy = mode == 0;
          p.temperature = 0.8f;
          p.top_k = mode == 2 ? 50 : 0;
          p.top_p = mode == 2 ? 0.9f : 1.0f;
          p.repetition_penalty = 1.1f;
        }
        auto* params = dev<k::SamplingRow>(n);
        cudaMemcpy(params, hp.data(), n * sizeof(k::SamplingRow), cudaMemcpyHostToDevice);
        int32_t* prev = dev<int32_t>(size_t(n) * 512);
        std::vector<int32_t> hl(n, 512);
        int32_t* len = dev<int32_t>(n);
        cudaMemcpy(len, hl.data(), n * 4, cudaMemcpyHostToDevice);
        int32_t* ids = dev<int32_t>(n);
        float* lp = dev<float>(n);
        char name[96];
        static const char* modes[] = {"greedy", "temp", "topk50+topp0.9"};
        std::snprintf(name, sizeof name, "sample %-15s n=%-3d V=%d (fp32)", modes[mode], n, vocab);
        bench(name, double(n) * vocab * 4, [&] {
          k::cuda::sample(logits, n, vocab, params, prev, 512, len, ids, lp, nullptr);
        });
        cudaFree(logits), cudaFree(params), cudaFree(prev), cudaFree(len), cudaFree(ids);
        cudaFree(lp);
      }
    }
  }
  return 0;
}
