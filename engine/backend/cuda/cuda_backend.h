// The CUDA backend: weights in fp16/bf16 (or fp32) on one GPU, cuBLAS GEMMs, fused elementwise
// kernels, paged attention, and a paged KV cache sized by a memory plan at load.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/activation_observer.h"
#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/model/model.h"
#include "kernels/kv_dtype.h"
#include "properties/config_enums.h"

namespace lmx {

enum class CudaDtype { F32, F16, BF16 };
// "fp32", "fp16", "bf16"; anything else is an lmx::Error naming it.
inline CudaDtype parse_cuda_dtype(const std::string& name) {
  if (name == "fp32") return CudaDtype::F32;
  if (name == "fp16") return CudaDtype::F16;
  if (name == "bf16") return CudaDtype::BF16;
  throw_error("dtype '{}' is not one of fp32, fp16, bf16", name);
}

// option.dtype auto on CUDA, from the checkpoint's torch_dtype: bf16 stays bf16, fp16 and fp32
// checkpoints run in fp16 (the serving default of LMI).
inline CudaDtype auto_cuda_dtype(const std::optional<std::string>& checkpoint_dtype) {
  return checkpoint_dtype.value_or("") == "bfloat16" ? CudaDtype::BF16 : CudaDtype::F16;
}
// option.dtype as a CUDA dtype; auto: unset (auto_cuda_dtype decides).
inline std::optional<CudaDtype> cuda_dtype_option(properties::Dtype d) {
  switch (d) {
    case properties::Dtype::Fp32:
      return CudaDtype::F32;
    case properties::Dtype::Fp16:
      return CudaDtype::F16;
    case properties::Dtype::Bf16:
      return CudaDtype::BF16;
    case properties::Dtype::Auto:
      break;
  }
  return std::nullopt;
}

struct CudaBackendOptions {
  CudaDtype dtype = CudaDtype::F16;
  // How the KV cache stores K and V (kernels/kv_dtype.h): the compute dtype, or fp8 E4M3 (half
  // the bytes of fp16; the memory plan's blocks are sized by it).
  kernels::KvDtype kv_dtype = kernels::KvDtype::model;
  // fp8 cache: each layer's dequantization scales, [num_layers] (kernels/kv_dtype.h); empty: 1
  // for every layer. make_cuda_backend fills it from LoadedModel::kv_scales when empty. Scales
  // other than 1 with a model-dtype cache are refused.
  std::vector<kernels::KvScale> kv_scales;
  int kv_block_size = 16;
  // KV blocks wanted (max_tokens x max_rolling_batch_size worth); 0 = all memory left after the
  // weights and scratch, minus `reserve_bytes`. Too many for the GPU is an error naming numbers.
  long kv_blocks = 0;
  size_t reserve_bytes = size_t(1) << 30;
  int max_step_tokens = 4096;  // tokens one forward may carry (scratch sizing)
  int max_sequences = 256;     // sequences one forward may carry (logits, metadata)
  // Decode steps (one token per sequence) are captured as CUDA graphs per batch-size bucket and
  // context bucket, and replayed; prefill and mixed steps run eagerly.
  bool cuda_graphs = false;
  // Families without a kernel-injection policy run the generic path: the same ops, unfused
  // (residual adds and biases as separate kernels).
  bool fused = true;
  // Decode-sized projections (<= 8 rows, fp16/bf16) through the tensor-core weight-streaming
  // kernel (kernels/cuda/gemv.cu) instead of cuBLAS: on an H100 it streams 2.6-3.0 TB/s against
  // cuBLAS's 2.2-2.7 (bench/kernels/gemv_bench.cu) and takes a Llama-2-7B batch-1 step from 6.12
  // to 5.63 ms. Off: every projection through cuBLAS (comparisons).
  bool skinny_gemv = true;
  // On the fused path with skinny_gemv, decode steps of <= 8 rows of pre-norm layers whose
  // residual is the stream itself add the o and down projections' outputs (and biases) to the
  // residual in their epilogues. RMSNorm models also run the norms inside the projections that
  // follow them (the norm weights folded into the qkv and gate/up columns at load), the gated
  // activation and (rotary dims a multiple of 16) rope + K/V write in the projections'
  // epilogues: 4 projections and attention a layer instead of 8 kernels. Off: the separate
  // kernels.
  bool fuse_decode_projections = true;
  // Before a decode batch size's first graph, time cuBLASLt's proposed algorithms for each
  // projection that runs through cuBLAS at that many rows (kernels/gemm.h, tune_linear) and keep
  // the fastest (H100, Llama-2-7B, 32 rows: the qkv projection 42.3 -> 39.8 us, bench/RESULTS.md).
  // Off: cuBLAS's default algorithm everywhere.
  bool tune_gemms = true;
  // Time every op class of eager steps with CUDA events (Backend::take_profile); adds a
  // synchronization-free event per op, so keep it off when serving. Graph replays are not split.
  bool profile = false;
  // Always use the generic attention kernel (tests compare it with the tuned ones).
  bool generic_attention = false;
  // Ranks the model is split over (docs/tensor-parallel.md): one GPU each, GPUs 0..N-1 of this
  // process (threads), or one a process under mpirun; NCCL between them. 1: one GPU, no NCCL.
  int tensor_parallel_degree = 1;
  // The GPU of rank 0 (replica k of option.max_replicas starts at k * degree); rank r runs on
  // first_device + r. Under mpirun: the process's local rank.
  int first_device = 0;
  // Calibration (smoothquant, fp8 KV scales): after each forward the observer sees a summary of
  // every projection input and of the K/V cached, reduced on the GPU (engine/backend/
  // activation_observer.h), and Backend::smoothing_scorer() answers the alpha search on the GPU.
  // Needs one rank, fuse_decode_projections and cuda_graphs off (the inputs the observer sees are
  // the model's own); the alpha search needs unquantized weights too (quantized ones: lmx::Error
  // when asked). Not owned; must outlive the backend.
  ActivationObserver* observer = nullptr;
};

bool cuda_device_available();
int cuda_device_count();  // GPUs visible to this process (0 without a driver)

// The model on opts.tensor_parallel_degree GPUs (one Backend to the caller; under mpirun,
// processes other than 0 run the leader's steps inside this call and get null when it stops).
std::unique_ptr<Backend> make_cuda_backend(const LoadedModel& model, const CudaBackendOptions& opts);
// Random weights made directly in GPU memory (benchmarks): no files, no host copy; with `quant`
// (dynamic_int8) every projection quantized as a checkpoint's would be.
std::unique_ptr<Backend> make_random_cuda_backend(const DecoderDesc& desc,
                                                  const CudaBackendOptions& opts, uint64_t seed,
                                                  const LinearQuant& quant = {});

}  // namespace lmx
