// Linear layer: y[M, N] = x[M, K] · w.weight^T (+ w.bias), one projection's LinearWeights w
// (kernels/linear.h): weight [N = w.out, K = w.in] in nn.Linear's layout, bias [N] or null.
// CPU: fp32, host memory, through BLAS (OpenBLAS's multi-threaded sgemm); linear adds w.bias.
// CUDA: T = __half or __nv_bfloat16 (or float) in device memory through cuBLAS with fp32
// accumulation; the output is T, or fp32 with linear_f32_out (the LM head's logits). These add no
// bias: the fused elementwise ops do (callers pass w.without_bias()), and a view with a bias is
// refused (std::invalid_argument), so a bias is never silently dropped. Which of the skinny
// launchers below apply w.bias is said at each. The cuBLAS handle and its workspace live in a
// GemmContext made once at load, so a launch allocates nothing and can be graph-captured.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/linear.h"
#include "kernels/stream.h"

namespace lmx::kernels::cpu {

// y [M, w.out] = x [M, w.in] · w.weight^T + w.bias (when not null); fp32, host.
void linear(const float* x, const LinearWeights<float>& w, float* y, int M);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

class GemmContext {
 public:
  explicit GemmContext(size_t workspace_bytes = 32u << 20);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  void* handle() const { return handle_; }  // cublasHandle_t
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

  struct Tuned;  // the shapes tune_linear gave a cuBLASLt algorithm (kernels/cuda/gemm.cu)
  Tuned& tuned() const { return *tuned_; }

 private:
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::unique_ptr<Tuned> tuned_;
};

// y [M, w.out] = x [M, w.in] · w.weight^T; w.bias must be null, and w not int8 (cuBLAS takes T
// weights: dequantize_int8 first, kernels/quantize.h).
template <typename T>
void linear(GemmContext& ctx, const T* x, const LinearWeights<T>& w, T* y, int M,
            cudaStream_t stream);

template <typename T>
void linear_f32_out(GemmContext& ctx, const T* x, const LinearWeights<T>& w, float* y, int M,
                    cudaStream_t stream);

// Picks the algorithm linear (Out = T) or linear_f32_out (Out = float) uses for one shape: times
// cuBLAS's default against the algorithms cuBLASLt's heuristic proposes, on `stream`, and keeps
// the fastest for every later call of that shape (M, N = w.out, K = w.in, T, Out), when it beats
// the default by more than `min_gain` (a fraction; the timing's noise is about 1%). Skinny shapes
// are where the default leaves bandwidth unused (H100, Llama-2-7B, M = 32: 6% on the qkv
// projection, 5% on the LM head; bench/RESULTS.md). `weights` are `count` [N, K] weight matrices
// of the shape (e.g. every layer's LinearWeights::weight): the timing rotates over them so that it
// reads HBM as a step does, not L2. x and y are scratch of M x K and M x N (overwritten).
// Synchronizes the stream: call it outside graph capture.
// What timing the algorithms of a GEMM with its own tuning found (Int8Gemm, Fp8Gemm: one row
// bucket's first call).
struct GemmTiming {
  double heuristic_us = 0, best_us = 0;  // a call: cuBLASLt's first proposal, the one kept
  int candidates = 0;
};

struct LinearTuning {
  double default_us = 0, best_us = 0;  // a call: cuBLAS's default, the algorithm kept
  int candidates = 0;                   // cuBLASLt algorithms timed
  bool lt = false;                      // a cuBLASLt algorithm was kept (else the default)
};
template <typename T, typename Out>
LinearTuning tune_linear(GemmContext& ctx, const T* const* weights, int count, const T* x, Out* y,
                         int M, int N, int K, cudaStream_t stream, double min_gain = 0.01);

// Decode-shaped linear (M <= kSkinnyMaxRows rows; T = __half or __nv_bfloat16; K = w.in with
// K % 8 == 0, 16-byte aligned x and w.weight; any N = w.out): a weight-streaming kernel that keeps
// the memory system busy where a general GEMM leaves bandwidth unused. Same math as linear (fp32
// accumulation, k summed in a different order). One launch, no allocation, no synchronization:
// graph-capturable (the first call in a process queries the SM count and occupancy once and caches
// them). 8 rows is the tensor-core tile's width, not a tuning choice. Design: kernels/cuda/gemv.cu;
// speed against cuBLAS: bench/kernels/gemv_bench.cu.
// One-byte weights (LinearWeights::quantized(): dynamic_int8's and smoothquant's int8 values, or
// fp8's E4M3 codes) with 16-bit activations: the same launchers read the bytes and scale each
// output row by its q_scale (K % 16 == 0); the bytes streamed halve.
// Grouped scales (w.grouped(): one a row per w.group k) multiply each group's products before
// they are summed; the GEMV takes the groups scale_groups_supported allows (kernels/linear.h) and
// refuses others.
constexpr int kSkinnyMaxRows = 8;
bool skinny_supported(int M, int K, bool byte_weights = false);
// y [M, N] = x [M, K] · w.weight^T; like linear, no bias (w.bias must be null).
template <typename T>
void skinny_linear(const T* x, const LinearWeights<T>& w, T* y, int M, cudaStream_t stream);
template <typename T>
void skinny_linear_f32_out(const T* x, const LinearWeights<T>& w, float* y, int M,
                           cudaStream_t stream);

// The norm a fused decode projection applies to its input rows before multiplying them. The
// caller folds the norm's weight into w's columns once (scale_columns) and, for LayerNorm, its
// bias into w's bias (b + W beta); the kernel then feeds x to the tensor cores as is, takes each
// row's sums (of x and x^2) from the x it loads anyway, and corrects each result:
//   RMSNorm   (row_sums null): y[m, n] = r_m (x[m] . W[n]),          r_m = 1 / sqrt(mean(x[m]^2) + eps)
//   LayerNorm (row_sums [N]):  y[m, n] = r_m (x[m] . W[n] - mu_m S_n), r_m = 1 / sqrt(var(x[m]) + eps),
//                              mu_m = mean(x[m]), S_n = row_sums[n] = sum_k W[n, k] of w as the
//                              kernel multiplies it (q[n, k] q_scale[n] for one-byte weights), so
//                              that the centering is exact for the weights used
// (before the bias and the epilogue). This makes the pre-norm decoder's add + norm disappear as a
// kernel on the decode path.
struct InputNorm {
  float eps = 0.0f;
  const float* row_sums = nullptr;  // [w.out], device: LayerNorm; null: RMSNorm
};

// Decode projections with their neighbours fused in (same kernel, shapes and limits as
// skinny_linear; no extra pass over anything; N = w.out, K = w.in; norm(x): InputNorm above):
//   skinny_linear_norm:       y[M, N] = norm(x) · w.weight^T   (no bias: w.bias must be null)
//   skinny_linear_norm_act:   y[M, N] = act(norm(x) · w.weight^T + w.bias)   (bias: [N] or null)
//   skinny_linear_norm_gated: y[M, inter] = act(g + bias[:inter]) * (u + bias[inter:]) where
//                             [g | u] = norm(x) · w.weight^T, w.weight: [2 x inter, K] (gate
//                             rows, then up rows, as gated_act's input; inter = w.out / 2, w.out
//                             odd is refused), bias = w.bias: [2 x inter] or null
//   skinny_linear_add:        residual[M, N] += x · w.weight^T + w.bias   (bias: [N] or null; one
//                             rounding)
//                             residual and bias are read before waiting for the kernel before
//                             this one in the stream (kernels/cuda/pdl.cuh): that kernel must not
//                             write them (in the decode layer the residual was last written by
//                             the projection two or three kernels back)
template <typename T>
void skinny_linear_norm(const T* x, const InputNorm& norm, const LinearWeights<T>& w, T* y, int M,
                        cudaStream_t stream);
template <typename T>
void skinny_linear_norm_act(ActivationKind kind, const T* x, const InputNorm& norm,
                            const LinearWeights<T>& w, T* y, int M, cudaStream_t stream);
template <typename T>
void skinny_linear_norm_gated(ActivationKind kind, const T* x, const InputNorm& norm,
                              const LinearWeights<T>& w, T* y, int M, cudaStream_t stream);
template <typename T>
void skinny_linear_add(const T* x, const LinearWeights<T>& w, T* residual, int M,
                       cudaStream_t stream);

// The decode qkv projection with rope_write_kv (kernels/rope_kv.h, same arguments and results:
// q biased and rotated in qkv, k and v biased, k rotated, into the cache) as its epilogue:
//   qkv-to-be = norm(x) · w.weight^T   (x: [M, K = w.in], w.weight: [qkv_stride = w.out, K] =
//                                       [q | k | v] rows; qkv_bias = w.bias: [w.out] or null)
// Supported when rope_epilogue_supported(rotary_dim, head_dim); k and v columns of qkv are not
// written (attention reads them from the cache). C: the cache's element type (T or KvFp8).
bool rope_epilogue_supported(int rotary_dim, int head_dim);
template <typename T, typename C>
void skinny_linear_norm_rope_kv(const T* x, const InputNorm& norm, const LinearWeights<T>& w,
                                T* qkv, const int32_t* token_pos, const float* inv_freq,
                                int rotary_dim, int heads, C* k_cache, C* v_cache,
                                const int32_t* block_tables, const int32_t* token_seq, int M,
                                const PagedKvLayout& layout, cudaStream_t stream);

}  // namespace lmx::kernels::cuda
