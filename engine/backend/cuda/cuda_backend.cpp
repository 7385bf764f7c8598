#include "engine/backend/cuda/cuda_backend.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <set>

#include "engine/backend/activation_kind.h"
#include "engine/backend/alibi.h"
#include "engine/backend/cuda/device_info.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/cuda/fp8_linear.h"
#include "engine/backend/cuda/input_recorder.h"
#include "engine/backend/cuda/smoothing_scorer.h"
#include "engine/backend/cuda/w8a8_linear.h"
#include "engine/backend/decode_graph_buckets.h"
#include "engine/backend/rope.h"
#include "engine/backend/sample_rows.h"
#include "engine/core/log.h"
#include "engine/model/kv_scales.h"
#include "engine/model/quantization.h"
#include "engine/model/shard.h"
#include "engine/parallel/mpi_communicator.h"
#include "engine/parallel/nccl_communicator.h"
#include "engine/parallel/rank_group.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/byte_weight_gemm.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/gpu_properties.h"
#include "kernels/linear.h"
#include "kernels/norm.h"
#include "kernels/quantize.h"
#include "kernels/rope_kv.h"
#include "kernels/sampling.h"

namespace lmx {
namespace {

namespace k = kernels::cuda;

template <typename T>
constexpr bool kTunedAttention = !std::is_same_v<T, float>;
// The weight-streaming GEMV and the fused decode projections (kernels/cuda/gemv.cu) exist for
// fp16 / bf16 only; `if constexpr` keeps fp32 builds from referring to them at all (at -O0 a
// runtime test alone left undefined references).
template <typename T>
constexpr bool kSkinnyGemv = !std::is_same_v<T, float>;

using KvFp8 = __nv_fp8_e4m3;  // the fp8 cache's element type (kernels/cuda/kv_types.cuh)

// Host-side plan of one forward: all int32 metadata packed for one copy to the device.
struct StepMeta {
  std::vector<int32_t> packed;  // ids | pos | seq | tables | cu_q | logit_rows
  int tokens = 0, seqs = 0, max_blocks = 0, logit_rows = 0, max_chunk = 0, max_context = 0;
  int lead_single = 0;  // leading chunks of one token (the scheduler puts decode tokens first)
  bool all_logits = false;  // some chunk wants every token's logits (BatchChunk::all_logits)
  size_t ids = 0, pos = 0, seq = 0, tables = 0, cu_q = 0, rows = 0;  // offsets into packed
};

template <typename T>
constexpr DeviceDtype kDeviceDtype = std::is_same_v<T, float>    ? DeviceDtype::F32
                                     : std::is_same_v<T, __half> ? DeviceDtype::F16
                                                                 : DeviceDtype::BF16;

// Whether the fused decode path folds the layer norms into the projections that read them (see
// CudaBackendOptions::fuse_decode_projections): pre-norm layers (RMSNorm or LayerNorm, sequential
// or parallel residual) whose blocks take the residual stream as their residual, in fp16 / bf16.
// The weights are folded as they are loaded (device_weights.h), before dynamic_int8 quantizes
// them. Not when `unfoldable`: under smoothquant its projections quantize the norm's output per
// token, which needs the norm applied (with 1/s folded in) first; an fp8 checkpoint's codes load
// as stored.
template <typename T>
bool folds_norms(const DecoderDesc& d, const CudaBackendOptions& o, bool unfoldable) {
  return o.fused && o.skinny_gemv && o.fuse_decode_projections &&
         d.norm_placement == NormPlacement::Pre && !d.residual_from_norm &&
         !std::is_same_v<T, float> && !unfoldable;
}

// How the decoder's projections are quantized (every layer's alike: smoothquant's W8A8, fp8,
// dynamic_int8 or none).
template <typename Buffer>
QuantKind decoder_quant(const ModelWeights<Buffer>& w) {
  return w.layers.empty() ? QuantKind::None : w.layers.front().qkv.quant.kind;
}
template <typename Buffer>
bool smoothquant_weights(const ModelWeights<Buffer>& w) {
  return decoder_quant(w) == QuantKind::W8A8;
}
// Whether the decoder's projections are an fp8 checkpoint's, whose codes are loaded as stored
// (folding a norm into them would change the codes: their norms stay unfolded).
inline bool checkpoint_fp8_weights(const ModelWeightRefs& w) {
  return !w.layers.empty() && w.layers.front().qkv.q.scale.present();
}

// One tensor-parallel rank (engine/model/shard.h; the whole model at degree 1) on the current
// GPU. desc_ is the rank's decoder (its heads, KV heads, intermediate rows) and everything below
// computes on it; desc() reports the model's. Row-parallel outputs are summed over the ranks by
// `comm_` (none at degree 1) and the vocabulary-parallel logits gathered.
template <typename T>
class CudaBackend final : public Backend {
 public:
  CudaBackend(const DecoderDesc& model_desc, TensorParallelRank tp,
              std::unique_ptr<DeviceCommunicator> comm, DeviceWeights<T> weights,
              const CudaBackendOptions& opts)
      : model_desc_(model_desc),
        desc_(rank_desc(model_desc, tp)),
        tp_(tp),
        comm_(std::move(comm)),
        opts_(opts),
        w_(std::move(weights)) {
    if (tp_.ranks > 1 && (!comm_ || comm_->size() != tp_.ranks))
      throw_error("internal: tensor-parallel rank {} of {} without its device communicator",
                  tp_.rank, tp_.ranks);
    check_kv_scales();
    LMX_CUDA_CHECK(cudaGetDevice(&device_));
    LMX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    if (desc_.positions == PositionKind::Rotary) {
      const auto inv = rope_inv_freq(desc_.rope);
      inv_freq_ = DeviceBuffer<float>(inv.size());
      LMX_CUDA_CHECK(cudaMemcpy(inv_freq_.get(), inv.data(), inv.size() * sizeof(float),
                                cudaMemcpyHostToDevice));
    }
    if (desc_.positions == PositionKind::Alibi) {  // the slopes of this rank's heads
      const auto all = alibi_slopes(model_desc_.num_heads);
      const std::vector<float> slopes(all.begin() + tp_.rank * desc_.num_heads,
                                      all.begin() + (tp_.rank + 1) * desc_.num_heads);
      alibi_ = DeviceBuffer<float>(slopes.size());
      upload(slopes, alibi_.get());
    }
    if (w_.lm_head.has_bias()) {  // the logits are fp32: so is the bias added to them
      std::vector<T> bias(w_.lm_head.bias.size());
      LMX_CUDA_CHECK(cudaMemcpy(bias.data(), w_.lm_head.bias.get(), w_.lm_head.bias.bytes(),
                                cudaMemcpyDeviceToHost));
      const std::vector<float> f32(bias.begin(), bias.end());
      lm_head_bias_ = DeviceBuffer<float>(f32.size());
      upload(f32, lm_head_bias_.get());
      LMX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    int8_ = !w_.lm_head.q.values.empty();  // dynamic_int8 marks every projection, head included
    w8a8_ = smoothquant_weights(w_);
    fp8_ = decoder_quant(w_) == QuantKind::Fp8;
    allocate_scratch();
    allocate_kv();
    if (opts_.observer) recorder_ = std::make_unique<InputRecorder<T>>(*opts_.observer, desc_);
    // The fused decode projections run the norms inside the projections that read them; the
    // load folded the norm weights into those (folds_norms), unless an fp8 checkpoint's codes
    // were to stay as stored.
    norms_folded_ = w_.norms_folded;
    if (norms_folded_) use_unit_norm_weights();
    rope_in_qkv_epilogue_ = norms_folded_ && desc_.positions == PositionKind::Rotary &&
                            k::rope_epilogue_supported(desc_.rope.rotary_dim, desc_.head_dim);
  }

  ~CudaBackend() override {
    cudaSetDevice(device_);
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const DecoderDesc& desc() const override { return model_desc_; }
  int tensor_parallel_degree() const override { return tp_.ranks; }
  const KvCacheShape& kv_shape() const override { return kv_; }
  std::string name() const override { return "cuda"; }
  std::string kv_cache_dtype_name() const override {
    if (opts_.kv_dtype == kernels::KvDtype::fp8_e4m3) return "fp8_e4m3";
    if constexpr (std::is_same_v<T, __half>) return "fp16";
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bf16";
    return "fp32";
  }

  // Every token's logits (lmx perplexity) on one rank: the LM head over all the step's rows, into
  // head buffers of their own grown to the step (the decode graphs keep theirs).
  bool supports_all_logits() const override { return tp_.ranks == 1; }

  // A calibration backend's (CudaBackendOptions::observer): the alpha search over its weights.
  SmoothingScorer* smoothing_scorer() override {
    if (!recorder_) return nullptr;
    if (!scorer_)
      scorer_ = std::make_unique<CudaSmoothingScorer<T>>(
          gemm_,
          [this](int l, LinearSlot slot) -> const DeviceLinear<T>& {
            return slot_linear(w_.layers.at(size_t(l)), slot);
          },
          stream_);
    return scorer_.get();
  }

  void forward(std::span<const BatchChunk> chunks, std::vector<float>& logits) override {
    LMX_CUDA_CHECK(cudaSetDevice(device_));  // the caller's thread may not have made it current
    const int rows = enqueue(chunks);
    gather_logits(rows);
    download_logits(rows, logits);
    finish_step();
  }

  // Tensor-parallel ranks other than the leader: the step's work and collectives, no logits copy.
  void forward_discard(std::span<const BatchChunk> chunks) override {
    LMX_CUDA_CHECK(cudaSetDevice(device_));
    gather_logits(enqueue(chunks));
    finish_step();
  }

  // Tensor parallelism: rows that draw_without_gather are drawn from every rank's own logits.
  bool draws_sharded() const override { return tp_.ranks > 1; }

  void forward_sample_discard(std::span<const BatchChunk> chunks,
                              std::span<const kernels::SamplingRow> params) override {
    LMX_CUDA_CHECK(cudaSetDevice(device_));
    refuse_all_logits(chunks);
    const int rows = enqueue(chunks);
    check_sample_rows(params.size(), params.size(), size_t(rows));
    draw_together(params);
    finish_step();
  }

  // The step, then the draw on the GPU: only ids and log-probs come back (plus the logits rows
  // when asked for).
  void forward_sample(std::span<const BatchChunk> chunks, std::span<const SampleSpec> specs,
                      std::span<SampledToken> out, std::vector<float>* logits) override {
    LMX_CUDA_CHECK(cudaSetDevice(device_));
    refuse_all_logits(chunks);
    const int rows = enqueue(chunks);
    check_sample_rows(specs.size(), out.size(), size_t(rows));
    const PackedSampleRows p = pack_sample_rows(specs);
    if (draws_sharded() && draw_without_gather(specs, desc_.vocab_size)) {
      draw_together(p.params);
      mark("sampling");
      k::combine_draws(draw_all_.get(), tp_.ranks, rows, sample_ids_.get(), sample_logprobs_.get(),
                       stream_);
      mark("");
      return finish_sample(rows, out);
    }
    gather_logits(rows);
    if (logits) download_returned_rows(specs, *logits);
    if (p.has_history() && size_t(rows) * p.prev_stride > sample_prev_.size())
      throw_error("repetition-penalty histories of {} x {} ids exceed their buffer ({} ids)", rows,
                  p.prev_stride, sample_prev_.size());
    mark("sampling");
    upload(p.params, sample_params_.get());
    if (p.has_history()) {
      upload(p.prev_ids, sample_prev_.get());
      upload(p.prev_len, sample_len_.get());
    }
    k::sample(logits_.get(), rows, desc_.vocab_size, sample_params_.get(),
              p.has_history() ? sample_prev_.get() : nullptr, p.prev_stride,
              p.has_history() ? sample_len_.get() : nullptr, sample_ids_.get(),
              sample_logprobs_.get(), stream_);
    mark("");
    finish_sample(rows, out);
  }

 private:
  using T_ = T;
  using DeviceLayer = LayerWeights<DeviceBuffer<T>>;
  static const T* ptr(const DeviceBuffer<T>& b) { return b.empty() ? nullptr : b.get(); }
  // The kernels' view of a projection: weight [out, in] and bias [out] (or null), device, T.
  // Quantized projections: their int8 values (dynamic_int8, smoothquant) or E4M3 codes (fp8) and
  // row scales instead of the weight.
  static kernels::LinearWeights<T> view(const DeviceLinear<T>& L) { return linear_view(L); }

  // `w` with weights in T for cuBLAS: an int8 projection expanded into dequant_ (one projection
  // at a time: no T copy of the model is kept). Where the W8A16 GEMM runs instead: byte_gemm().
  kernels::LinearWeights<T> dense(const kernels::LinearWeights<T>& w) {
    if (w.fp8()) throw_error("internal: an fp8 projection handed to cuBLAS (it runs Fp8Linear)");
    if (!w.int8()) return w;
    if (size_t(w.out) * size_t(w.in) > dequant_.size())
      throw_error("internal: a {} x {} int8 projection exceeds the dequantization buffer ({})",
                  w.out, w.in, dequant_.size());
    // [out, in] as [out x in / group, group]: a scale a row of it (group = in: one a row).
    const int group = w.grouped() ? w.group : w.in;
    k::dequantize_rows_int8<T>(w.q, w.q_scale, dequant_.get(), w.out * (w.in / group), group,
                               stream_);
    return {dequant_.get(), w.bias, w.out, w.in};
  }

  static constexpr int kGraphContextMin = 512;

  // Plans the step, copies its metadata and enqueues it (graph replay for decode-only steps when
  // graphs are on). Returns the number of real logits rows (graph padding rows excluded).
  int enqueue(std::span<const BatchChunk> chunks) {
    const bool decode_only = std::all_of(chunks.begin(), chunks.end(), [](const BatchChunk& c) {
      return c.tokens.size() == 1 && c.compute_logits && !c.all_logits;
    });
    const int bucket = opts_.cuda_graphs && decode_only ? graph_bucket(int(chunks.size())) : 0;
    const StepMeta m = bucket ? plan(chunks, bucket, kGraphContextMin) : plan(chunks, 0, 0);
    step_all_logits_ = m.all_logits;
    if (m.all_logits) grow_all_head(size_t(m.logit_rows));
    upload(m.packed, meta_.get());
    if (recorder_) recorder_->begin(stream_);
    if (bucket)
      run_graph(m);
    else
      run_step(m);
    return bucket ? int(chunks.size()) : m.logit_rows;
  }

  void download_logits(int rows, std::vector<float>& logits) {
    logits.resize(size_t(rows) * desc_.vocab_size);
    download(step_all_logits_ ? all_head_.logits.get() : logits_.get(), logits);
  }

  // The logits rows of the specs with return_logits, packed in their order.
  void download_returned_rows(std::span<const SampleSpec> specs, std::vector<float>& logits) {
    const size_t V = size_t(desc_.vocab_size);
    logits.resize(V * size_t(std::count_if(specs.begin(), specs.end(),
                                           [](const SampleSpec& s) { return s.return_logits; })));
    size_t to = 0;
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].return_logits)
        LMX_CUDA_CHECK(cudaMemcpyAsync(logits.data() + V * to++, logits_.get() + V * i,
                                       V * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  }

  // The drawn ids and log-probs off the device, then the step's end.
  void finish_sample(int rows, std::span<SampledToken> out) {
    std::vector<int32_t> ids(size_t(rows), 0);
    std::vector<float> logprobs(size_t(rows), 0.0f);
    download(sample_ids_.get(), ids);
    download(sample_logprobs_.get(), logprobs);
    finish_step();
    for (int i = 0; i < rows; ++i) out[size_t(i)] = {ids[size_t(i)], logprobs[size_t(i)]};
  }

  template <typename U>
  void upload(const std::vector<U>& host, U* device) {
    LMX_CUDA_CHECK(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(U),
                                   cudaMemcpyHostToDevice, stream_));
  }
  template <typename U>
  void download(const U* device, std::vector<U>& host) {
    LMX_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, host.size() * sizeof(U),
                                   cudaMemcpyDeviceToHost, stream_));
  }

  // Waits for the step and its copies, then folds the profiling marks.
  void finish_step() {
    LMX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    LMX_CUDA_CHECK(cudaGetLastError());
    collect_marks();
    if (recorder_) recorder_->deliver(stream_);
  }

  // Calibration: the input of layer l's projection `slot` (x [n, in], device) to the recorder.
  void observe(int l, LinearSlot slot, const T* x, int n, int64_t in) {
    if (recorder_) recorder_->input(l, slot, x, n, int(in), stream_);
  }

  // Profiling: an event before each op class; the time to the next event is that op's.
  void mark(const char* label) {
    if (!opts_.profile || capturing_) return;
    if (marks_.size() == events_.size()) {
      cudaEvent_t e;
      LMX_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    LMX_CUDA_CHECK(cudaEventRecord(events_[marks_.size()], stream_));
    marks_.push_back(label);
  }

  // After the step's synchronization: fold the marks into the per-op totals.
  void collect_marks() {
    for (size_t i = 0; i + 1 < marks_.size(); ++i) {
      if (marks_[i].empty()) continue;  // between a step's end and the next op: not an op
      float ms = 0;
      LMX_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
      profile_[marks_[i]] += ms;
    }
    if (!marks_.empty()) ++profiled_steps_;
    marks_.clear();
  }

 public:
  nlohmann::json take_profile() override {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [op, ms] : profile_) out[op] = {{"ms", ms}, {"steps", profiled_steps_}};
    profile_.clear();
    profiled_steps_ = 0;
    return out;
  }

 private:
  // One-byte weights with 16-bit activations past the GEMV's rows: the W8A16 GEMM (the bytes
  // widened in registers, kernels/byte_weight_gemm.h).
  //  - dynamic_int8 up to kByteGemmMaxRows rows, and up to kWgmmaByteGemmMaxRows where the GEMM
  //    runs its wgmma kernel (Hopper), where they measured faster than expanding the projection
  //    for cuBLAS (bench/RESULTS.md: with int8 rows in fragment order, kernels/int8_layout.h,
  //    the kernel runs at 0.69-0.90x fp16's rate at 512 rows, 0.79-0.87x at 4096, and the
  //    expansion costs ~3 bytes of traffic a weight whatever the rows; prefill 1024 measured
  //    faster this way); more rows (long prefill chunks) and K % 16 != 0 take dense() and cuBLAS.
  //  - fp8 up to kFp8ByteGemmMaxRows rows, on the decode path (CudaBackendOptions::skinny_gemv,
  //    as the GEMV): decode steps of 12 and 16 rows took 5-8% less time than through the W8A8 FP8
  //    GEMM (which also quantizes the activations first), of 24 and 31 rows 2-7% more
  //    (bench/RESULTS.md); like the GEMV it reads the E4M3 codes with 16-bit activations.
  //  - block-scaled fp8 (grouped E4M3 scales) at every row count: the FP8 GEMM's epilogue takes
  //    one scale a row (kernels/fp8_linear.h), so those checkpoints' prefill reads the codes with
  //    16-bit activations here as their decode does.
  static constexpr int kByteGemmMaxRows = 256;
  static constexpr int kWgmmaByteGemmMaxRows = 1024;
  static constexpr int kFp8ByteGemmMaxRows = 16;
  bool byte_gemm(const kernels::LinearWeights<T>& w, int M) const {
    if (byte_gemm_ && w.fp8() && w.grouped()) return k::ByteWeightGemm::supported(w.in);
    return w.quantized() && byte_gemm_rows(w, M);
  }
  // On Hopper the int8 LM head takes the W8A16 GEMM (its wgmma kernel) at every row count, never
  // the expansion: its many-row steps (all_logits: every token of a prompt, for perplexity and
  // prompt logprobs) are rare, and the dequantization buffer then need not hold the head
  // (Llama-3-8B: 1.05 GB for its 128,256 rows, against 235 MB for gate/up) for ~4-5% more time
  // on those steps (H100, 4096 rows of Llama-2-7B's head: 1959 us against the expansion's 1862;
  // bench/RESULTS.md). Elsewhere (mma.sync kernel, grouped scales) it follows byte_gemm_rows().
  bool head_never_expands() const {
    const kernels::LinearWeights<T> head = view(w_.lm_head);
    return byte_gemm_ && head.int8() && k::ByteWeightGemm::supported(head.in) &&
           byte_gemm_->plan(kWgmmaByteGemmMaxRows + 1, head.out, head.in, head.grouped()).wgmma;
  }
  bool byte_gemm_rows(const kernels::LinearWeights<T>& w, int M) const {
    if (!kSkinnyGemv<T> || !byte_gemm_ || !k::ByteWeightGemm::supported(w.in)) return false;
    if (w.fp8()) return opts_.skinny_gemv && M <= kFp8ByteGemmMaxRows;
    return M <= kByteGemmMaxRows ||
           (M <= kWgmmaByteGemmMaxRows && byte_gemm_->plan(M, w.out, w.in, w.grouped()).wgmma);
  }

  // Whether L's projection of M rows quantizes its input per token before its GEMM: smoothquant's
  // W8A8 (always, where its 1/s is explicit), fp8 past the GEMV's and the W8A16 GEMM's rows. Its
  // quantizer may then read the kernel before it in that kernel's place (quantize_act_input).
  bool quantizes_input(const DeviceLinear<T>& L, int M) const {
    if (L.quant.kind == QuantKind::W8A8) return !L.q.inv_smooth.empty() || !skinny(M, int(L.in));
    if (L.quant.kind == QuantKind::Fp8)
      return !skinny(M, int(L.in)) && !byte_gemm(view(L).without_bias(), M);
    return false;
  }
  static constexpr const T* kQuantizedInput = nullptr;

  // f(the W8A8Linear or Fp8Linear that runs L, where quantizes_input(L, M)): both take the same
  // calls (quantize, quantize_act, quantize_add_norm, multiply).
  template <typename F>
  decltype(auto) quantized_linear(const DeviceLinear<T>& L, F&& f) {
    if (L.quant.kind == QuantKind::W8A8) return f(*w8a8_linear_);
    return f(*fp8_linear_);
  }

  // L's quantizer (quantizes_input(L, M)) takes the MLP's activation of up (+ bias) in the
  // activation kernel's place; L then runs on kQuantizedInput.
  void quantize_act_input(const DeviceLinear<T>& L, const T* up, const T* bias, int M) {
    const k::MlpActivation act{to_kernel(desc_.activation), desc_.mlp == MlpKind::Gated};
    quantized_linear(L, [&](auto& q) { q.quantize_act(L, act, up, bias, M, stream_); });
  }

  bool skinny(int M, int K) const {
    return opts_.skinny_gemv && !std::is_same_v<T, float> &&
           k::skinny_supported(M, K, int8_ || w8a8_ || fp8_);
  }

  // y[M, out] = x[M, in] · W^T, without the bias (the layer program adds biases where it can
  // fuse them): the weight-streaming kernel for decode-sized M, cuBLAS otherwise (dynamic_int8's
  // int8 weights with 16-bit activations: the W8A16 GEMM, kernels/byte_weight_gemm.h).
  // smoothquant's W8A8 and fp8's projections take quantized activations past the GEMV's rows
  // (smoothquant's always with an explicit 1/s); at decode sizes the GEMV reads their one-byte
  // weights with 16-bit activations, where quantizing the activations would not pay (the step reads
  // the weights either way) and would only add its rounding. x == kQuantizedInput: L's quantizer
  // already holds its input (quantize_act_input, norm_in_quantizer; only where
  // quantizes_input(L, M)).
  void linear(const DeviceLinear<T>& L, const T* x, T* y, int M) {
    const kernels::LinearWeights<T> w = view(L).without_bias();
    if (quantizes_input(L, M)) {
      return quantized_linear(L, [&](auto& q) {
        if (x != kQuantizedInput) q.quantize(L, x, M, stream_);
        q.multiply(L, y, M, stream_);
      });
    }
    if (x == kQuantizedInput)
      throw_error("internal: a quantized input handed to a projection that reads 16-bit rows");
    if constexpr (kSkinnyGemv<T>) {
      if (skinny(M, w.in)) return k::skinny_linear<T>(x, w, y, M, stream_);
      if (byte_gemm(w, M)) return byte_gemm_->run<T, T>(x, w, y, M, stream_);
    }
    k::linear<T>(gemm_, x, dense(w), y, M, stream_);
  }

  // y = x · W^T + b, the bias as its own kernel.
  void linear_bias(const DeviceLinear<T>& L, const T* x, T* y, int M) {
    linear(L, x, y, M);
    if (L.has_bias()) k::bias_add<T>(y, L.bias.get(), nullptr, y, M, int(L.out), stream_);
  }

  // The decode path that runs the norms inside the projections (see CudaBackendOptions): each
  // layer's attention and MLP norm weights (and LayerNorm biases) were folded into the projection
  // that reads the norm's output (qkv, gate/up) at load (folds_norms); every other path then
  // normalizes with unit weights and zero biases. The final norm keeps its own (the LM head may be
  // the tied embedding).
  void use_unit_norm_weights() {
    const int H = desc_.hidden_size;
    const std::vector<T> ones(size_t(H), T(1.0f)), zeros(size_t(H), T(0.0f));
    ones_ = DeviceBuffer<T>(size_t(H));
    upload(ones, ones_.get());
    if (desc_.norm == NormKind::LayerNorm) {
      zeros_ = DeviceBuffer<T>(size_t(H));
      upload(zeros, zeros_.get());
      for (const DeviceLayer& L : w_.layers)
        if (L.qkv.norm_fold.row_sums.empty() || L.up.norm_fold.row_sums.empty())
          throw_error("internal: a LayerNorm folded without the row sums that center its input");
    }
    LMX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    lmx::logger().info(
        "decode projections fused: {} weights{} folded into the qkv and {} projections",
        desc_.norm == NormKind::LayerNorm ? "LayerNorm" : "RMSNorm",
        desc_.norm == NormKind::LayerNorm ? " and biases" : "",
        desc_.mlp == MlpKind::Gated ? "gate/up" : "up");
  }

  // The norm a fused decode projection applies to its input (kernels/gemm.h): RMSNorm, or the
  // folded LayerNorm centered through L's row sums.
  k::InputNorm input_norm(const DeviceLinear<T>& L) const {
    return {desc_.norm_eps, L.norm_fold.row_sums.empty() ? nullptr : L.norm_fold.row_sums.get()};
  }

  // Whether this step's layers run the fused decode projections.
  bool fused_decode(int n) const {
    return norms_folded_ && skinny(n, desc_.hidden_size) && skinny(n, desc_.q_size()) &&
           skinny(n, desc_.intermediate_size);
  }

  // Whether the o and down projections of this step add their outputs to the residual stream in
  // their epilogues (decode-sized steps of the fused path, pre-norm layers whose residual is x_).
  bool residual_in_epilogue(int n) const {
    return opts_.fused && opts_.fuse_decode_projections && !explicit_smoothing_ &&
           desc_.norm_placement == NormPlacement::Pre && !desc_.residual_from_norm &&
           skinny(n, desc_.q_size()) && skinny(n, desc_.intermediate_size);
  }

  // ---- The layer program (docs/model-layer.md): the CUDA backend's one interpretation of the
  // DecoderDesc, the same steps as the CPU backend's. x_ [n, hidden] is the residual stream. A
  // block's output waits in delta_ (pending_) until the next norm adds it in the same kernel, or,
  // on fused decode steps, the projection's epilogue adds it to x_ and the norms run inside the
  // projections that read them.

  struct Step {
    const StepMeta& m;
    const int32_t* d;   // the step's packed metadata on the device
    bool fused_decode;          // fused_decode(m.tokens): norms inside the projections
    bool residual_in_epilogue;  // residual_in_epilogue(m.tokens), implied by fused_decode
    int n() const { return m.tokens; }
  };

  // Everything one step enqueues after its metadata is on the device; capturable.
  void run_step(const StepMeta& m) {
    layout_.max_blocks_per_seq = m.max_blocks;
    const Step s{m, meta_.get(), fused_decode(m.tokens), residual_in_epilogue(m.tokens)};
    pending_ = false;
    embed(s);
    for (int l = 0; l < desc_.num_layers; ++l) run_layer(w_.layers[size_t(l)], l, s);
    lm_head(s);
    mark("");  // end of the step
  }

  // x_ = token embedding (projected to hidden when embed_dim differs) + learned position rows,
  // then the embedding norm.
  void embed(const Step& s) {
    const int n = s.n(), H = desc_.hidden_size, E = desc_.embed_dim;
    const int32_t* ids = s.d + s.m.ids;
    const int32_t* pos = s.d + s.m.pos;
    mark("embedding");
    if (!desc_.projects_embeddings()) {
      k::embedding<T>(ids, w_.embed.get(), pos, position_table(), x_.get(), n, H, stream_);
    } else {
      k::embedding<T>(ids, w_.embed.get(), nullptr, nullptr, h_.get(), n, E, stream_);
      linear(w_.project_in, h_.get(), x_.get(), n);
      if (const T* table = position_table()) {
        k::embedding<T>(pos, table, nullptr, nullptr, delta_.get(), n, H, stream_);
        k::bias_add<T>(delta_.get(), nullptr, x_.get(), x_.get(), n, H, stream_);
      }
    }
    if (desc_.embedding_norm) norm_rows(w_.embed_norm.weight, w_.embed_norm.bias, x_.get(), x_.get(), n);
  }

  // Row p of the learned position table (OPT's rows start at its offset); null without one.
  const T* position_table() const {
    if (desc_.positions != PositionKind::LearnedAbsolute) return nullptr;
    return w_.position_embed.get() + size_t(desc_.position_offset) * desc_.hidden_size;
  }

  void run_layer(const DeviceLayer& L, int l, const Step& s) {
    const int n = s.n();
    const DeviceNorm<T>& mlp_norm = desc_.shared_block_norm ? L.attn_norm : L.mlp_norm;
    if (desc_.norm_placement == NormPlacement::Post) {  // x = norm(x + block(x))
      attention_block(L, l, s, x_.get());
      post_norm(L.attn_norm, n);
      mlp_block(L, l, s, x_.get(), delta_.get());
      post_norm(mlp_norm, n);
      return;
    }
    if (desc_.parallel_residual && s.fused_decode) {
      // Both projections that normalize x_ themselves (qkv, up) run before either block adds its
      // output to x_ in its last projection's epilogue: qkv, the MLP, then attention and o.
      qkv_projection(L, l, s, h_.get());
      mlp_block(L, l, s, h_.get(), delta_.get());
      attend_and_project(L, l, s);
      return;
    }
    if (desc_.parallel_residual) {  // x = x + attn(norm1(x)) + mlp(norm2(x))
      mark("norm");
      block_norm(L.attn_norm, h_.get(), n);
      T* mlp_in = h_.get();
      if (!desc_.shared_block_norm) {
        mlp_in = mlp_in_.get();
        norm_rows(layer_norm_weight(mlp_norm.weight), layer_norm_bias(mlp_norm.bias), x_.get(),
                  mlp_in, n);
      }
      attention_block(L, l, s, h_.get());
      mlp_block(L, l, s, mlp_in, h_.get());  // h_ is free once the projections have read it
      if (!s.residual_in_epilogue)  // both outputs pending: one sum for the next norm to add
        k::bias_add<T>(h_.get(), nullptr, delta_.get(), delta_.get(), n, desc_.hidden_size, stream_);
      return;
    }
    // x = r + block(norm(x)), r = x, or norm(x) with residual_from_norm.
    const T* attn_in = begin_block(L.attn_norm, L.qkv, s);
    attention_block(L, l, s, attn_in);
    const T* mlp_in = begin_block(mlp_norm, L.up, s);
    mlp_block(L, l, s, mlp_in, delta_.get());
  }

  // Before a pre-norm block whose first projection is `first`: h_ = norm(x_ + pending output),
  // the block's input; or kQuantizedInput where the norm ran inside first's quantizer
  // (norm_in_quantizer: h_ not written). Fused decode steps skip it (the projection that reads
  // the norm runs it).
  const T* begin_block(const DeviceNorm<T>& norm, const DeviceLinear<T>& first, const Step& s) {
    if (s.fused_decode) return h_.get();
    mark("norm");
    if (norm_in_quantizer(norm, first, s.n())) return kQuantizedInput;
    block_norm(norm, h_.get(), s.n());
    if (desc_.residual_from_norm)
      LMX_CUDA_CHECK(cudaMemcpyAsync(x_.get(), h_.get(), size_t(s.n()) * desc_.hidden_size * sizeof(T),
                                     cudaMemcpyDeviceToDevice, stream_));
    return h_.get();
  }

  // block_norm's residual add and norm inside the quantizer of `first`, where first quantizes its
  // input and the fused kernel applies (kernels/quantize.h's quantize_add_norm_rows_*): x_ +=
  // the pending output, first's codes from the normalized rows; false: nothing done.
  bool norm_in_quantizer(const DeviceNorm<T>& norm, const DeviceLinear<T>& first, int n) {
    if (!opts_.fused || recorder_ || desc_.residual_from_norm || !quantizes_input(first, n))
      return false;
    const k::AddNorm<T> add_norm{x_.get(),
                                 pending_ ? delta_.get() : nullptr,
                                 layer_norm_weight(norm.weight).get(),
                                 layer_norm_bias(norm.bias).get(),
                                 desc_.norm_eps,
                                 desc_.norm == NormKind::LayerNorm};
    const bool done = quantized_linear(
        first, [&](auto& q) { return q.quantize_add_norm(first, add_norm, n, stream_); });
    if (done) pending_ = false;
    return done;
  }

  // delta_ [n, hidden] = o_proj(attention(rope(qkv_proj(in)))) + bias, appending the K/V to layer
  // l's cache (fused decode: the qkv projection normalizes x_ itself and o_proj adds into x_).
  void attention_block(const DeviceLayer& L, int l, const Step& s, const T* in) {
    qkv_projection(L, l, s, in);
    attend_and_project(L, l, s);
  }

  // qkv_ = qkv_proj(in) with q rotated, K/V (biased, k rotated) appended to layer l's cache. Fused
  // decode steps normalize x_ inside the projection (`in` unused), with rope and the cache write
  // in its epilogue where the rotary allows it.
  void qkv_projection(const DeviceLayer& L, int l, const Step& s, const T* in) {
    const int n = s.n();
    if constexpr (kSkinnyGemv<T>) {
      if (s.fused_decode) {
        if (rope_in_qkv_epilogue_) {  // rope + K/V write in the projection's epilogue
          mark("qkv_proj_rope_kv");
          with_kv_cache(l, [&](auto* kc, auto* vc) {
            k::skinny_linear_norm_rope_kv<T>(x_.get(), input_norm(L.qkv), view(L.qkv), qkv_.get(),
                                             s.d + s.m.pos, inv_freq_.get(), desc_.rope.rotary_dim,
                                             desc_.num_heads, kc, vc, s.d + s.m.tables,
                                             s.d + s.m.seq, n, layer_layout(l), stream_);
          });
        } else {
          mark("qkv_proj");
          k::skinny_linear_norm<T>(x_.get(), input_norm(L.qkv), view(L.qkv).without_bias(),
                                   qkv_.get(), n, stream_);
          write_rope_kv(L, l, s);  // with the qkv bias
        }
        return;
      }
    }
    mark("qkv_proj");
    observe(l, LinearSlot::Qkv, in, n, L.qkv.in);
    linear(L.qkv, in, qkv_.get(), n);
    write_rope_kv(L, l, s);
  }

  // Attention over layer l's cache, then o_proj (output_projection).
  void attend_and_project(const DeviceLayer& L, int l, const Step& s) {
    mark("attention");
    attention(l, s);
    mark("o_proj");
    observe(l, LinearSlot::O, attn_.get(), s.n(), L.o.in);
    output_projection(L.o, attn_.get(), delta_.get(), s);
  }

  // A block's last projection: added to x_ in its epilogue (with its bias) when the step has
  // residual_in_epilogue, else written to `out` with its bias, pending until a norm adds it.
  // Under tensor parallelism each rank's output is partial (its input columns; the bias on rank
  // 0 only) and an all-reduce sums them: of `out`, or, in the epilogue case, of x_ itself, which
  // the ranks other than 0 overwrite with their part alone (a plain store: no memset node between
  // the kernels, so the projection still starts its weight stream under the attention or the
  // gate/up projection before it), so the sum is x_ + every rank's part.
  void output_projection(const DeviceLinear<T>& L, const T* in, T* out, const Step& s) {
    const size_t elems = size_t(s.n()) * desc_.hidden_size;
    if constexpr (kSkinnyGemv<T>) {
      if (s.residual_in_epilogue) {
        if (tp_.rank == 0)
          k::skinny_linear_add<T>(in, view(L), x_.get(), s.n(), stream_);
        else  // no bias here (engine/model/shard.cpp): skinny_linear refuses one
          k::skinny_linear<T>(in, view(L), x_.get(), s.n(), stream_);
        all_reduce(x_.get(), elems);
        return;
      }
    }
    linear_bias(L, in, out, s.n());
    all_reduce(out, elems);
    pending_ = true;
  }

  // data [elems] of T, device: the sum over the tensor-parallel ranks, in place.
  void all_reduce(T* data, size_t elems) {
    if (tp_.ranks == 1) return;
    mark("all_reduce");
    comm_->all_reduce_sum(data, elems, kDeviceDtype<T>, stream_);
  }

  // out [n, hidden] = down(act(up(in))) + bias, gated or plain (fused decode: the gate/up
  // projection normalizes x_ itself and the down projection adds into x_).
  void mlp_block(const DeviceLayer& L, int l, const Step& s, const T* in, T* out) {
    const int n = s.n(), I = desc_.intermediate_size;
    const bool gated = desc_.mlp == MlpKind::Gated;
    mark("gate_up_proj");
    if constexpr (kSkinnyGemv<T>) {
      if (s.fused_decode) {  // bias and activation in the epilogue
        if (gated)
          k::skinny_linear_norm_gated<T>(to_kernel(desc_.activation), x_.get(), input_norm(L.up),
                                         view(L.up), act_.get(), n, stream_);
        else
          k::skinny_linear_norm_act<T>(to_kernel(desc_.activation), x_.get(), input_norm(L.up),
                                       view(L.up), act_.get(), n, stream_);
        mark("down_proj");
        output_projection(L.down, act_.get(), out, s);
        return;
      }
    }
    observe(l, LinearSlot::Up, in, n, L.up.in);
    linear(L.up, in, up_.get(), n);
    mark("activation");
    const T* up_bias = ptr(L.up.bias);
    if (!opts_.fused && up_bias) {  // generic path: the bias as its own kernel
      k::bias_add<T>(up_.get(), up_bias, nullptr, up_.get(), n, int(L.up.out), stream_);
      up_bias = nullptr;
    }
    if (opts_.fused && !recorder_ && !s.residual_in_epilogue && quantizes_input(L.down, n)) {
      // The down projection's quantizer computes the activation itself: act_ is not written.
      mark("down_proj");
      quantize_act_input(L.down, up_.get(), up_bias, n);
      output_projection(L.down, kQuantizedInput, out, s);
      return;
    }
    if (gated)
      k::bias_gated_act<T>(to_kernel(desc_.activation), up_.get(), up_bias, act_.get(), n, I, stream_);
    else
      k::bias_act<T>(to_kernel(desc_.activation), up_.get(), up_bias, act_.get(), n, I, stream_);
    mark("down_proj");
    observe(l, LinearSlot::Down, act_.get(), n, L.down.in);
    output_projection(L.down, act_.get(), out, s);
  }

  // The logits of the rows that want them: final norm (adding the last block's output), the
  // rows gathered, project_out, LM head in fp32 (+ bias).
  void lm_head(const Step& s) {
    const int n = s.n(), H = desc_.hidden_size, rows = s.m.logit_rows;
    mark("final_norm");
    if (desc_.final_norm) {
      add_norm(x_.get(), pending_ ? delta_.get() : nullptr, w_.final_norm.weight,
               w_.final_norm.bias, h_.get(), n);
    } else if (pending_) {
      k::bias_add<T>(delta_.get(), nullptr, x_.get(), x_.get(), n, H, stream_);
    }
    pending_ = false;
    mark("lm_head");
    // Every token's rows (all_logits) go through head buffers of their own, sized to the step.
    T* gathered = s.m.all_logits ? all_head_.gathered.get() : gathered_.get();
    T* projected = s.m.all_logits ? all_head_.projected.get() : head_in_.get();
    k::gather_rows<T>(desc_.final_norm ? h_.get() : x_.get(), s.d + s.m.rows, gathered, rows, H,
                      stream_);
    const T* head_in = gathered;
    if (desc_.projects_embeddings()) {
      linear(w_.project_out, gathered, projected, rows);
      head_in = projected;
    }
    // The weight may be the tied embedding; the bias is added to the fp32 logits below. Under
    // tensor parallelism the rank's vocabulary rows go to rank_logits_, then are gathered.
    const int head_rows = int(w_.lm_head.out);
    float* out = s.m.all_logits ? all_head_.logits.get()
                 : tp_.ranks > 1 ? rank_logits_.get()
                                 : logits_.get();
    kernels::LinearWeights<T> head = view(w_.lm_head).without_bias();
    if (!head.quantized()) head.weight = w_.head_weight().get();  // the embedding when tied
    bool done = false;
    if constexpr (kSkinnyGemv<T>) {
      if (skinny(rows, head.in)) {
        k::skinny_linear_f32_out<T>(head_in, head, out, rows, stream_);
        done = true;
      } else if (head.int8() && (byte_gemm(head, rows) || head_never_expands())) {
        byte_gemm_->run<T, float>(head_in, head, out, rows, stream_);
        done = true;
      }
    }
    if (!done) k::linear_f32_out<T>(gemm_, head_in, dense(head), out, rows, stream_);
    if (!lm_head_bias_.empty())
      k::bias_add<float>(out, lm_head_bias_.get(), nullptr, out, rows, head_rows, stream_);
  }

  // all_head_ holding `rows` rows (before the step is enqueued: never inside a graph).
  void grow_all_head(size_t rows) {
    if (rows <= all_head_.rows) return;
    all_head_.gathered = DeviceBuffer<T>(rows * size_t(desc_.hidden_size));
    if (desc_.projects_embeddings())
      all_head_.projected = DeviceBuffer<T>(rows * size_t(desc_.embed_dim));
    all_head_.logits = DeviceBuffer<float>(rows * size_t(desc_.vocab_size));
    all_head_.rows = rows;
  }

  // Tensor parallelism, after the step: logits_ [rows, vocab] from every rank's rank_logits_
  // [rows, per] (vocabulary rows [r * per, (r + 1) * per) of rank r; the padding past the
  // vocabulary dropped). Outside the decode graphs: a step that draws without gathering skips it.
  void gather_logits(int rows) {
    if (tp_.ranks == 1 || rows == 0) return;  // every rank has the same rows: none gathers
    const int per = int(w_.lm_head.out);
    mark("logits_gather");
    const size_t n = size_t(rows) * per;
    comm_->all_gather(rank_logits_.get(), gathered_logits_.get(), n, DeviceDtype::F32, stream_);
    const int V = desc_.vocab_size;
    for (int r = 0; r < tp_.ranks; ++r) {
      const VocabSlice ids = rank_vocab_slice(V, {r, tp_.ranks});
      if (ids.cols == 0) continue;
      LMX_CUDA_CHECK(cudaMemcpy2DAsync(logits_.get() + ids.first, size_t(V) * sizeof(float),
                                       gathered_logits_.get() + size_t(r) * n,
                                       size_t(per) * sizeof(float), size_t(ids.cols) * sizeof(float),
                                       size_t(rows), cudaMemcpyDeviceToDevice, stream_));
    }
    mark("");
  }

  // Tensor parallelism: the rows' draws from this rank's logits, every rank's partials gathered
  // into draw_all_ [ranks, rows] (kernels/sampling.h) instead of the logits.
  void draw_together(std::span<const kernels::SamplingRow> params) {
    const int rows = int(params.size()), per = int(w_.lm_head.out);
    const VocabSlice ids = rank_vocab_slice(desc_.vocab_size, tp_);
    mark("sampling");
    LMX_CUDA_CHECK(cudaMemcpyAsync(sample_params_.get(), params.data(),
                                   params.size() * sizeof(kernels::SamplingRow),
                                   cudaMemcpyHostToDevice, stream_));
    k::draw_partials(rank_logits_.get(), rows, per, ids.cols, ids.first, sample_params_.get(),
                     draw_mine_.get(), stream_);
    constexpr size_t kFloats = sizeof(kernels::DrawPartial) / sizeof(float);
    comm_->all_gather(reinterpret_cast<const float*>(draw_mine_.get()),
                      reinterpret_cast<float*>(draw_all_.get()), size_t(rows) * kFloats,
                      DeviceDtype::F32, stream_);
    mark("");
  }

  // The captured batch size that holds `seqs` decode tokens (engine/backend/decode_graph_buckets.h):
  // a padded step must fit the step's sequence and token capacity.
  int graph_bucket(int seqs) const {
    return decode_graph_bucket(seqs, std::min(opts_.max_sequences, opts_.max_step_tokens));
  }

  // Decode steps replay a graph per (batch bucket, context bucket); the first step of a shape runs
  // eagerly (cuBLAS picks and warms its kernels), the second captures.
  void run_graph(const StepMeta& m) {
    const std::pair<int, int> key{m.tokens, m.max_context};
    if (auto it = graphs_.find(key); it != graphs_.end()) {
      LMX_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
      return;
    }
    if (!warmed_.count(key)) {
      warmed_.insert(key);
      tune_projections(m.tokens);
      run_step(m);
      return;
    }
    cudaGraph_t graph = nullptr;
    LMX_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    capturing_ = true;
    try {
      run_step(m);
      capturing_ = false;
    } catch (...) {
      capturing_ = false;
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    LMX_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    LMX_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaGraphDestroy(graph);
    graphs_.emplace(key, exec);
    lmx::logger().info("captured a decode graph for batch {} / context {}", key.first, key.second);
    LMX_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
  }

  // Once per decode batch size: each projection that runs through cuBLAS at `rows` rows gets the
  // fastest algorithm tune_linear finds, timed over every layer's weights (the step's scratch
  // buffers serve as x and y; nothing of a step is in them yet).
  void tune_projections(int rows) {
    if (!opts_.tune_gemms || !tuned_rows_.insert(rows).second) return;
    const int H = desc_.hidden_size, Q = desc_.q_size(), I = desc_.intermediate_size;
    const int E = desc_.embed_dim;
    // int8 projections reach cuBLAS through dequant_: the one weight buffer it reads.
    auto every_layer = [&](DeviceLinear<T> DeviceLayer::*linear) {
      std::vector<const T*> v;
      for (const DeviceLayer& L : w_.layers)
        v.push_back(int8_ ? dequant_.get() : (L.*linear).weight.get());
      return v;
    };
    // `first`: the first layer's projection (the W8A16 GEMM's choice depends on its shape).
    auto tune = [&](const char* name, const DeviceLinear<T>& first,
                    const std::vector<const T*>& weights, const T* x, auto* y, int N, int K) {
      if (skinny(rows, K) || (int8_ && byte_gemm_rows(view(first), rows))) return;
      const k::LinearTuning t = k::tune_linear<T>(gemm_, weights.data(), int(weights.size()), x,
                                                  y, rows, N, K, stream_);
      lmx::logger().info(
          "{} rows, {} ({} x {}): cuBLAS default {:.1f} us, kept {} {:.1f} us ({} tried)", rows,
          name, N, K, t.default_us, t.lt ? "cuBLASLt" : "the default", t.best_us, t.candidates);
    };
    // smoothquant's and fp8's GEMMs time their own (W8A8Linear, Fp8Linear)
    if (!w8a8_ && !fp8_ && !w_.layers.empty()) {
      const DeviceLayer& L0 = w_.layers.front();
      tune("qkv", L0.qkv, every_layer(&DeviceLayer::qkv), h_.get(), qkv_.get(), desc_.qkv_size(),
           H);
      tune("o", L0.o, every_layer(&DeviceLayer::o), attn_.get(), delta_.get(), H, Q);
      tune("up", L0.up, every_layer(&DeviceLayer::up), h_.get(), up_.get(), desc_.up_rows(), H);
      tune("down", L0.down, every_layer(&DeviceLayer::down), act_.get(), delta_.get(), H, I);
    }
    if (int8_ && head_never_expands()) return;  // it never reaches cuBLAS
    tune("lm_head", w_.lm_head, {int8_ ? dequant_.get() : w_.head_weight().get()},
         desc_.projects_embeddings() ? head_in_.get() : gathered_.get(),
         tp_.ranks > 1 ? rank_logits_.get() : logits_.get(), int(w_.lm_head.out), E);
  }

  // A layer norm's weight and bias as the norm kernels use them: ones and zeros once the load
  // folded them (use_unit_norm_weights).
  const DeviceBuffer<T>& layer_norm_weight(const DeviceBuffer<T>& w) const {
    return norms_folded_ ? ones_ : w;
  }
  const DeviceBuffer<T>& layer_norm_bias(const DeviceBuffer<T>& b) const {
    return norms_folded_ && !b.empty() ? zeros_ : b;
  }

  // residual += delta (when given); out = norm(residual). out may alias delta, not residual.
  void add_norm(T* residual, const T* delta, const DeviceBuffer<T>& w, const DeviceBuffer<T>& b,
                T* out, int rows) {
    if (!opts_.fused) {  // generic path: the residual add and the norm as two kernels
      if (delta)
        k::bias_add<T>(delta, nullptr, residual, residual, rows, desc_.hidden_size, stream_);
      norm_rows(w, b, residual, out, rows);
      return;
    }
    if (desc_.norm == NormKind::RmsNorm)
      k::add_rms_norm<T>(residual, delta, w.get(), out, rows, desc_.hidden_size, desc_.norm_eps,
                         stream_);
    else
      k::add_layer_norm<T>(residual, delta, w.get(), b.get(), out, rows, desc_.hidden_size,
                           desc_.norm_eps, stream_);
  }

  // out = norm(in), no residual; in and out may alias.
  void norm_rows(const DeviceBuffer<T>& w, const DeviceBuffer<T>& b, const T* in, T* out, int rows) {
    if (desc_.norm == NormKind::RmsNorm)
      k::rms_norm<T>(in, w.get(), out, rows, desc_.hidden_size, desc_.norm_eps, stream_);
    else
      k::layer_norm<T>(in, w.get(), b.get(), out, rows, desc_.hidden_size, desc_.norm_eps, stream_);
  }

  // A pre-norm block's input: out = norm(x_ + the pending block output).
  void block_norm(const DeviceNorm<T>& norm, T* out, int rows) {
    add_norm(x_.get(), pending_ ? delta_.get() : nullptr, layer_norm_weight(norm.weight),
             layer_norm_bias(norm.bias), out, rows);
    pending_ = false;
  }

  // Post-norm: x_ = norm(x_ + delta_) (delta_ keeps the sum).
  void post_norm(const DeviceNorm<T>& norm, int rows) {
    mark("norm");
    add_norm(delta_.get(), x_.get(), norm.weight, norm.bias, x_.get(), rows);
    pending_ = false;
  }

  // Rotary embedding (+ qkv bias) on qkv_ with the K/V write into the cache.
  void write_rope_kv(const DeviceLayer& L, int l, const Step& s) {
    const int n = s.n(), QKV = desc_.qkv_size();
    mark("rope_kv_write");
    const bool rotary = desc_.positions == PositionKind::Rotary;
    const T* qkv_bias = ptr(L.qkv.bias);
    if (!opts_.fused && qkv_bias) {  // generic path: the bias as its own kernel
      k::bias_add<T>(qkv_.get(), qkv_bias, nullptr, qkv_.get(), n, QKV, stream_);
      qkv_bias = nullptr;
    }
    with_kv_cache(l, [&](auto* kc, auto* vc) {
      k::rope_write_kv<T>(qkv_.get(), QKV, qkv_bias, s.d + s.m.pos,
                          rotary ? inv_freq_.get() : nullptr, rotary ? desc_.rope.rotary_dim : 0,
                          desc_.num_heads, kc, vc, s.d + s.m.tables, s.d + s.m.seq, n,
                          layer_layout(l), stream_);
    });
    if (recorder_) {  // calibration: K (rotated) and V as cached, from qkv_
      const T* k = qkv_.get() + desc_.q_size();
      recorder_->kv(l, k, k + desc_.kv_size(), n, QKV, stream_);
    }
  }

  // opts_.kv_scales: one per layer, and only for an fp8 cache.
  void check_kv_scales() const {
    const auto& s = opts_.kv_scales;
    if (s.empty()) return;
    if (s.size() != size_t(desc_.num_layers))
      throw_error("{} KV cache scales for a model of {} layers", s.size(), desc_.num_layers);
    if (opts_.kv_dtype != kernels::KvDtype::fp8_e4m3)
      for (const kernels::KvScale& x : s)
        if (x.k != 1.0f || x.v != 1.0f)
          throw_error("KV cache scales other than 1 need the fp8_e4m3 cache; this cache is {}",
                      kv_cache_dtype_name());
  }

  // Layer l's cache: the shared geometry with the layer's fp8 scales.
  kernels::PagedKvLayout layer_layout(int l) const {
    kernels::PagedKvLayout L = layout_;
    if (!opts_.kv_scales.empty()) L.scale = opts_.kv_scales[size_t(l)];
    return L;
  }

  // Calls fn(k_cache, v_cache) with layer l's caches as pointers to their element type: T, or
  // KvFp8 when opts_.kv_dtype is fp8_e4m3.
  template <typename Fn>
  void with_kv_cache(int l, Fn&& fn) {
    unsigned char* kc = k_cache_[size_t(l)].get();
    unsigned char* vc = v_cache_[size_t(l)].get();
    if (opts_.kv_dtype == kernels::KvDtype::fp8_e4m3)
      fn(reinterpret_cast<KvFp8*>(kc), reinterpret_cast<KvFp8*>(vc));
    else
      fn(reinterpret_cast<T*>(kc), reinterpret_cast<T*>(vc));
  }

  void attention(int l, const Step& s) {
    const StepMeta& m = s.m;
    const int32_t* d = s.d;
    const T* q = qkv_.get();
    const int QKV = desc_.qkv_size();
    const int window = desc_.sliding_window[size_t(l)];
    const float scale = desc_.attention_scale();
    const float* alibi = alibi_.empty() ? nullptr : alibi_.get();
    with_kv_cache(l, [&](const auto* kc, const auto* vc) {
      if constexpr (kTunedAttention<T>) {
        if (!opts_.generic_attention && k::tuned_attention_head_dim(desc_.head_dim) &&
            QKV % 8 == 0) {
          // The leading one-token chunks (decode tokens) through the decode kernel, the rest
          // (prefill chunks) through the prefill kernel: its cu_q entries are absolute token
          // indices, so it takes the chunk list from chunk lead_single on, unchanged.
          if (m.lead_single > 0)
            k::paged_attention_decode<T>(q, QKV, kc, vc, d + m.tables, d + m.seq, d + m.pos,
                                         attn_.get(), m.lead_single, desc_.num_heads, scale, alibi,
                                         window, layer_layout(l), m.max_context, workspace_.get(),
                                         workspace_.size(), stream_);
          if (m.lead_single < m.seqs)
            k::paged_attention_prefill<T>(q, QKV, kc, vc, d + m.tables, d + m.seq, d + m.pos,
                                          d + m.cu_q + m.lead_single, m.seqs - m.lead_single,
                                          m.max_chunk, attn_.get(), desc_.num_heads, scale, alibi,
                                          window, layer_layout(l), stream_);
          return;
        }
      }
      k::paged_attention_generic<T>(q, QKV, kc, vc, d + m.tables, d + m.seq, d + m.pos, attn_.get(),
                                    m.tokens, desc_.num_heads, scale, alibi, window,
                                    layer_layout(l), stream_);
    });
  }

  // Packs the step's metadata. With pad_to > 0 (a graph bucket) the batch is padded with
  // `pad_to - chunks` decode rows that read and write only the reserved null KV block, the block
  // tables get their fixed maximal width, and max_context is rounded up to a power of two
  // (>= min_context), so every shape the graph baked in is the bucket's.
  StepMeta plan(std::span<const BatchChunk> chunks, int pad_to, int min_context) const {
    StepMeta m;
    const int real = int(chunks.size());
    m.seqs = std::max(real, pad_to);
    for (const BatchChunk& c : chunks) {
      if (c.tokens.size() == 1 && m.lead_single == m.tokens) ++m.lead_single;
      m.tokens += int(c.tokens.size());
      m.max_blocks = std::max(m.max_blocks, int(c.block_table.size()));
      m.max_chunk = std::max(m.max_chunk, int(c.tokens.size()));
      m.max_context = std::max(m.max_context, c.start_position + int(c.tokens.size()));
      m.logit_rows += c.all_logits ? int(c.tokens.size()) : c.compute_logits ? 1 : 0;
      m.all_logits = m.all_logits || c.all_logits;
    }
    if (m.all_logits && !supports_all_logits())
      throw_error("a batch chunk asks for all_logits, which a tensor-parallel rank cannot give");
    if (m.max_context > desc_.max_position_embeddings)
      throw_error("positions up to {} exceed the model's {}", m.max_context,
                  desc_.max_position_embeddings);
    if (m.tokens > opts_.max_step_tokens || m.seqs > opts_.max_sequences)
      throw_error("batch of {} tokens in {} sequences exceeds the CUDA backend's limits ({} tokens, "
                  "{} sequences)", m.tokens, m.seqs, opts_.max_step_tokens, opts_.max_sequences);
    if (pad_to > 0) {
      m.tokens = m.logit_rows = m.lead_single = pad_to;
      m.max_chunk = 1;
      m.max_blocks = max_blocks_;
      int ctx = min_context;
      while (ctx < m.max_context) ctx *= 2;
      m.max_context = std::min(ctx, desc_.max_position_embeddings);
    }
    m.max_blocks = std::max(m.max_blocks, 1);
    m.ids = 0;
    m.pos = m.ids + size_t(m.tokens);
    m.seq = m.pos + size_t(m.tokens);
    m.tables = m.seq + size_t(m.tokens);
    m.cu_q = m.tables + size_t(m.seqs) * m.max_blocks;
    m.rows = m.cu_q + size_t(m.seqs) + 1;
    m.packed.assign(m.rows + size_t(m.logit_rows), 0);
    if (m.packed.size() > meta_.size())
      throw_error("step metadata ({} ints) exceeds its buffer ({})", m.packed.size(), meta_.size());
    int t = 0, row = 0;
    for (int s = 0; s < m.seqs; ++s) {
      int32_t* table = &m.packed[m.tables + size_t(s) * m.max_blocks];
      m.packed[m.cu_q + size_t(s)] = t;
      if (s >= real) {  // padding row: the null block, position 0
        std::fill(table, table + m.max_blocks, null_block_);
        m.packed[m.seq + size_t(t)] = s;
        m.packed[m.rows + size_t(row++)] = t++;
        continue;
      }
      const BatchChunk& c = chunks[size_t(s)];
      if (int(c.block_table.size()) * kv_.block_size < c.start_position + int(c.tokens.size()))
        throw_error("block table of chunk {} does not cover its positions", s);
      for (size_t b = 0; b < c.block_table.size(); ++b) {
        if (c.block_table[b] < 0 || c.block_table[b] >= kv_.num_blocks)
          throw_error("KV block id {} out of range", c.block_table[b]);
        table[b] = c.block_table[b];
      }
      const int first = t;
      for (size_t i = 0; i < c.tokens.size(); ++i, ++t) {
        if (c.tokens[i] < 0 || c.tokens[i] >= desc_.vocab_size)
          throw_error("token id {} is outside the vocabulary [0, {})", c.tokens[i], desc_.vocab_size);
        m.packed[m.ids + size_t(t)] = c.tokens[i];
        m.packed[m.pos + size_t(t)] = c.start_position + int32_t(i);
        m.packed[m.seq + size_t(t)] = s;
      }
      if (c.all_logits)
        for (int r = first; r < t; ++r) m.packed[m.rows + size_t(row++)] = r;
      else if (c.compute_logits)
        m.packed[m.rows + size_t(row++)] = t - 1;
    }
    m.packed[m.cu_q + size_t(m.seqs)] = t;
    return m;
  }

  void allocate_scratch() {
    const size_t tok = size_t(opts_.max_step_tokens), H = size_t(desc_.hidden_size);
    const size_t I = size_t(desc_.intermediate_size);
    const size_t S = size_t(opts_.max_sequences);
    x_ = DeviceBuffer<T_>(tok * H);
    h_ = DeviceBuffer<T_>(tok * std::max(H, size_t(desc_.embed_dim)));  // also the token embedding
    if (desc_.parallel_residual && !desc_.shared_block_norm) mlp_in_ = DeviceBuffer<T_>(tok * H);
    delta_ = DeviceBuffer<T_>(tok * H);
    qkv_ = DeviceBuffer<T_>(tok * size_t(desc_.qkv_size()));
    attn_ = DeviceBuffer<T_>(tok * size_t(desc_.q_size()));
    up_ = DeviceBuffer<T_>(tok * size_t(desc_.up_rows()));
    act_ = DeviceBuffer<T_>(tok * I);
    gathered_ = DeviceBuffer<T_>(S * H);
    if (desc_.projects_embeddings()) head_in_ = DeviceBuffer<T_>(S * size_t(desc_.embed_dim));
    logits_ = DeviceBuffer<float>(S * size_t(desc_.vocab_size));
    if (tp_.ranks > 1) {  // this rank's vocabulary rows, and every rank's gathered
      rank_logits_ = DeviceBuffer<float>(S * size_t(w_.lm_head.out));
      gathered_logits_ = DeviceBuffer<float>(size_t(tp_.ranks) * rank_logits_.size());
      draw_mine_ = DeviceBuffer<kernels::DrawPartial>(S);
      draw_all_ = DeviceBuffer<kernels::DrawPartial>(size_t(tp_.ranks) * S);
    }
    sample_params_ = DeviceBuffer<kernels::SamplingRow>(S);
    sample_prev_ = DeviceBuffer<int32_t>(S * size_t(desc_.max_position_embeddings));
    sample_len_ = DeviceBuffer<int32_t>(S);
    sample_ids_ = DeviceBuffer<int32_t>(S);
    sample_logprobs_ = DeviceBuffer<float>(S);
    max_blocks_ = desc_.max_position_embeddings / opts_.kv_block_size + 1;
    // ids, positions, sequences, block tables, cu_q, logits rows (every token's with all_logits)
    meta_ = DeviceBuffer<int32_t>(3 * tok + S * size_t(max_blocks_) + S + 1 + std::max(tok, S));
    if constexpr (kTunedAttention<T_>)
      workspace_ = DeviceBuffer<char>(k::paged_attention_decode_workspace_bytes(
          opts_.max_sequences, desc_.num_heads, desc_.num_kv_heads, desc_.head_dim,
          desc_.max_position_embeddings));
    if ((int8_ || fp8_) && kSkinnyGemv<T_>)  // 16-bit: past the GEMV's rows (byte_gemm())
      byte_gemm_ = std::make_unique<k::ByteWeightGemm>();
    if (int8_) {  // the largest projection cuBLAS may be handed (dense())
      size_t largest = 0;
      for_each_linear(w_, [&](const DeviceLinear<T_>& L, const std::string&) {
        if (&L == &w_.lm_head && head_never_expands()) return;
        largest = std::max(largest, size_t(L.out) * size_t(L.in));
      });
      dequant_ = DeviceBuffer<T_>(largest);
    }
    if (w8a8_) {  // the widest W8A8 input and output
      size_t in = 0, out = 0;
      for_each_linear(w_, [&](const DeviceLinear<T_>& L, const std::string&) {
        if (L.quant.kind != QuantKind::W8A8) return;
        in = std::max(in, size_t(L.in));
        out = std::max(out, size_t(L.out));
        explicit_smoothing_ = explicit_smoothing_ || !L.q.inv_smooth.empty();
      });
      w8a8_linear_ = std::make_unique<W8A8Linear<T_>>(gemm_, tok, in, out);
    }
    if (fp8_) {  // the widest fp8 input, and output not a multiple of 16
      size_t in = 0, odd_out = 0;
      for_each_linear(w_, [&](const DeviceLinear<T_>& L, const std::string&) {
        if (L.quant.kind != QuantKind::Fp8) return;
        in = std::max(in, size_t(L.in));
        if (L.out % 16 != 0) odd_out = std::max(odd_out, size_t(L.out));
      });
      fp8_linear_ = std::make_unique<Fp8Linear<T_>>(gemm_, tok, in, odd_out);
    }
  }

  // The memory plan: what is left after weights and scratch holds the KV cache.
  void allocate_kv() {
    kv_.block_size = opts_.kv_block_size;
    kv_.dtype = opts_.kv_dtype;
    layout_ = {kv_.block_size, desc_.num_kv_heads, desc_.head_dim, 1};
    const size_t per_block_layer = size_t(kv_.block_size) * desc_.kv_size() *
                                   size_t(kernels::kv_value_bytes(opts_.kv_dtype, sizeof(T)));
    const size_t per_block = 2 * per_block_layer * size_t(desc_.num_layers);
    size_t free_bytes = 0, total_bytes = 0;
    LMX_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const size_t usable = free_bytes > opts_.reserve_bytes ? free_bytes - opts_.reserve_bytes : 0;
    long blocks = opts_.kv_blocks > 0 ? opts_.kv_blocks : long(usable / per_block);
    if (blocks <= 0 || size_t(blocks) * per_block > usable)
      throw_error("GPU memory plan does not fit: weights {:.2f} GiB, KV cache {} blocks x {} tokens "
                  "= {:.2f} GiB wanted, {:.2f} GiB free of {:.2f} GiB (keeping {:.2f} GiB in "
                  "reserve); lower option.max_tokens or option.max_rolling_batch_size",
                  w_.bytes / 1073741824.0, blocks, kv_.block_size,
                  double(blocks) * per_block / 1073741824.0, free_bytes / 1073741824.0,
                  total_bytes / 1073741824.0, opts_.reserve_bytes / 1073741824.0);
    kv_.num_blocks = int(blocks);
    null_block_ = int32_t(blocks);  // one more block, never handed out: graph padding rows use it
    for (int l = 0; l < desc_.num_layers; ++l) {
      k_cache_.emplace_back(size_t(blocks + 1) * per_block_layer);
      v_cache_.emplace_back(size_t(blocks + 1) * per_block_layer);
      LMX_CUDA_CHECK(cudaMemset(k_cache_.back().get(), 0, k_cache_.back().bytes()));
      LMX_CUDA_CHECK(cudaMemset(v_cache_.back().get(), 0, v_cache_.back().bytes()));
    }
    lmx::logger().info(
        "CUDA memory plan: weights {:.2f} GiB, KV cache {} blocks ({:.2f} GiB, {}), "
        "{:.2f} GiB free before the cache",
        w_.bytes / 1073741824.0, blocks, double(blocks) * per_block / 1073741824.0,
        kernels::kv_dtype_name(opts_.kv_dtype), free_bytes / 1073741824.0);
  }

  DecoderDesc model_desc_;  // the whole model's (what desc() reports)
  DecoderDesc desc_;        // this rank's: its heads, KV heads and intermediate rows
  TensorParallelRank tp_;
  std::unique_ptr<DeviceCommunicator> comm_;  // null at degree 1
  int device_ = 0;                            // the GPU this rank runs on
  CudaBackendOptions opts_;
  DeviceWeights<T> w_;
  KvCacheShape kv_;
  kernels::PagedKvLayout layout_{};
  cudaStream_t stream_ = nullptr;
  k::GemmContext gemm_;
  DeviceBuffer<float> inv_freq_;
  // Per layer [blocks, block_size, kv_heads, head_dim] of T or KvFp8 (with_kv_cache), as bytes.
  std::vector<DeviceBuffer<unsigned char>> k_cache_, v_cache_;
  // Scratch [tokens, *]: the residual stream, a norm's output (or the token embedding), the
  // pending block output, projections' outputs; [sequences, *]: the rows that want logits.
  DeviceBuffer<T> x_, h_, delta_, qkv_, attn_, up_, act_, gathered_;
  DeviceBuffer<T> mlp_in_;   // [tokens, hidden] parallel residual with two norms: norm2(x)
  DeviceBuffer<T> head_in_;  // [sequences, embed_dim] project_out's output
  // all_logits steps: the LM head's input, project_out's output and the logits of every token,
  // [rows, hidden], [rows, embed_dim], [rows, vocab]; grown to the largest such step.
  struct AllRowsHead {
    DeviceBuffer<T> gathered, projected;
    DeviceBuffer<float> logits;
    size_t rows = 0;
  } all_head_;
  bool step_all_logits_ = false;  // the step enqueued last wants every token's logits
  bool pending_ = false;     // delta_ holds a block output not yet added to x_ (layer program)
  DeviceBuffer<float> alibi_;         // [heads] ALiBi slopes
  DeviceBuffer<float> lm_head_bias_;  // [vocab] fp32, GPT-J's biased LM head
  bool norms_folded_ = false;
  bool int8_ = false;  // dynamic_int8: every projection holds int8 values and row scales
  bool w8a8_ = false;  // smoothquant: the decoder's projections are W8A8 (the LM head is not)
  bool explicit_smoothing_ = false;  // some W8A8 projection applies 1/s to its activations
  std::unique_ptr<InputRecorder<T>> recorder_;      // calibration (CudaBackendOptions::observer)
  std::unique_ptr<CudaSmoothingScorer<T>> scorer_;  // its alpha search, made when first asked
  std::unique_ptr<W8A8Linear<T>> w8a8_linear_;  // their step scratch and int8 GEMM
  bool fp8_ = false;  // fp8: the decoder's projections hold E4M3 codes (the LM head does not)
  std::unique_ptr<Fp8Linear<T>> fp8_linear_;  // their step scratch and FP8 GEMM
  DeviceBuffer<T> dequant_;  // int8: the largest projection in T, for the GEMMs cuBLAS runs
  std::unique_ptr<kernels::cuda::ByteWeightGemm> byte_gemm_;  // int8 / E4M3 in 16-bit: W8A16
  DeviceBuffer<T> ones_;       // [hidden] the layer norms' weight once folded
  DeviceBuffer<T> zeros_;      // [hidden] their bias once folded (LayerNorm)
  bool rope_in_qkv_epilogue_ = false;  // fused decode: rope + K/V write in the qkv epilogue
  DeviceBuffer<float> logits_;  // [sequences, vocab]
  DeviceBuffer<float> rank_logits_, gathered_logits_;  // TP: [S, per], [ranks, S, per]
  DeviceBuffer<kernels::DrawPartial> draw_mine_, draw_all_;  // TP draws: [S], [ranks, S]
  DeviceBuffer<kernels::SamplingRow> sample_params_;  // [S] the step's draws
  DeviceBuffer<int32_t> sample_prev_, sample_len_;    // [S, positions], [S] penalty histories
  DeviceBuffer<int32_t> sample_ids_;                  // [S] drawn ids
  DeviceBuffer<float> sample_logprobs_;               // [S]
  DeviceBuffer<int32_t> meta_;
  DeviceBuffer<char> workspace_;
  int max_blocks_ = 1;     // block-table width of graph steps (the model's whole context)
  int32_t null_block_ = 0;  // KV block that graph padding rows read and write
  std::map<std::pair<int, int>, cudaGraphExec_t> graphs_;
  std::set<std::pair<int, int>> warmed_;
  std::set<int> tuned_rows_;  // decode batch sizes tune_projections has seen
  bool capturing_ = false;
  std::vector<cudaEvent_t> events_;         // profiling
  std::vector<std::string> marks_;
  std::map<std::string, double> profile_;
  long profiled_steps_ = 0;
};

// FP8 weights (option.quantize=fp8, fp8 checkpoints) multiply on FP8 tensor cores: compute
// capability 8.9 (L4, L40) and later. Checked before any weight is loaded.
void require_fp8_tensor_cores(bool fp8_weights) {
  if (!fp8_weights) return;
  int device = 0;
  LMX_CUDA_CHECK(cudaGetDevice(&device));
  const auto& gpu = k::current_gpu();
  const int major = gpu.major, minor = gpu.minor;
  if (major * 10 + minor < 89)
    throw_error(
        "fp8 weights (option.quantize=fp8 or an fp8 checkpoint) need FP8 tensor cores (compute "
        "capability 8.9+: L4, L40, H100, H200); GPU {} ({}) is {}.{}: use dynamic_int8 or "
        "smoothquant there",
        device, cuda_device_name(), major, minor);
}

template <typename T>
std::unique_ptr<Backend> build(const DecoderDesc& desc, TensorParallelRank tp,
                               std::unique_ptr<DeviceCommunicator> comm, const ModelWeightRefs& refs,
                               std::optional<uint64_t> seed, const CudaBackendOptions& o) {
  const DecoderDesc rank = rank_desc(desc, tp);
  require_fp8_tensor_cores(decoder_quant(refs) == QuantKind::Fp8);
  const WeightLoad load{
      folds_norms<T>(rank, o, smoothquant_weights(refs) || checkpoint_fp8_weights(refs)),
      rank.norm == NormKind::LayerNorm, rank.shared_block_norm};
  DeviceWeights<T> w = seed ? random_weights<T>(refs, *seed, load) : upload_weights<T>(refs, load);
  lmx::logger().info(
      "rank {}: {:.2f} GiB of weights on the GPU (at most {:.2f} GiB during the load)", tp.rank,
      double(w.bytes) / (1 << 30), double(w.peak_bytes) / (1 << 30));
  return std::make_unique<CudaBackend<T>>(desc, tp, std::move(comm), std::move(w), o);
}

// One rank on the current GPU: its slices of the weights, uploaded from the checkpoint (each
// rank reads only its own) or random (`seed`, benchmarks).
std::unique_ptr<Backend> make_rank(const DecoderDesc& desc, const ModelWeightRefs& refs,
                                   std::optional<uint64_t> seed, TensorParallelRank tp,
                                   std::unique_ptr<DeviceCommunicator> comm,
                                   const CudaBackendOptions& o) {
  const ModelWeightRefs mine = shard_weights(refs, desc, tp);
  switch (o.dtype) {
    case CudaDtype::F32: return build<float>(desc, tp, std::move(comm), mine, seed, o);
    case CudaDtype::F16: return build<__half>(desc, tp, std::move(comm), mine, seed, o);
    case CudaDtype::BF16: return build<__nv_bfloat16>(desc, tp, std::move(comm), mine, seed, o);
  }
  return nullptr;
}

// The GPU of a rank: one a rank from GPU 0 in this process; under mpirun the process's rank
// among those of its host (Open MPI's local rank).
int rank_device(const Communicator& host, const CudaBackendOptions& o) {
  if (!launched_by_mpi()) return o.first_device + host.rank();
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return local ? std::atoi(local) : 0;
}

// Degree 1: the one rank, no communicator. More: launch_ranks (threads, or mpirun's processes),
// each rank on its GPU with an NCCL communicator over the group.
std::unique_ptr<Backend> make_group(const DecoderDesc& desc, const ModelWeightRefs& refs,
                                    std::optional<uint64_t> seed, const CudaBackendOptions& o) {
  if (!cuda_device_available()) throw_error("no CUDA GPU is available on this machine");
  const int degree = o.tensor_parallel_degree;
  // A degree that does not split the model, before any rank thread starts. mpirun's processes are
  // ranks already: they first agree on the group (launch_ranks: a process count other than the
  // degree is the error to report), then each rank's build refuses the split, as on the CPU.
  if (!launched_by_mpi()) rank_desc(desc, {0, degree});
  const int gpus = cuda_device_count();
  if (!launched_by_mpi() && o.first_device + degree > gpus)
    throw_error("tensor_parallel_degree {} from GPU {} needs GPUs {}..{}; {} are visible to this "
                "process", degree, o.first_device, o.first_device, o.first_device + degree - 1,
                gpus);
  if (degree == 1 && !launched_by_mpi()) {
    LMX_CUDA_CHECK(cudaSetDevice(o.first_device));
    return make_rank(desc, refs, seed, {0, 1}, nullptr, o);
  }
  return launch_ranks(degree, [&](Communicator& host) {
    // Every rank must reach NCCL's initialization, which waits for all of them: agree first that
    // each has its GPU (a later failure is caught by the group's own agreement).
    std::exception_ptr no_device;
    try {
      LMX_CUDA_CHECK(cudaSetDevice(rank_device(host, o)));
    } catch (...) {
      no_device = std::current_exception();
    }
    if (!all_ranks_ok(host, !no_device)) {
      if (no_device) std::rethrow_exception(no_device);
      throw_error("another tensor-parallel rank could not select its GPU");
    }
    return make_rank(desc, refs, seed, {host.rank(), host.size()}, DeviceCommunicator::create(host),
                     o);
  });
}

// A calibration backend (CudaBackendOptions::observer) computes the model unfused, eagerly, on one
// GPU: what its observer sees is the model's own computation. (Its alpha search also needs the
// weights unquantized: CudaSmoothingScorer refuses quantized ones when asked; the fp8 cache's
// calibration runs the quantized model as it will serve.)
void check_observer_options(const CudaBackendOptions& o) {
  if (!o.observer) return;
  if (o.tensor_parallel_degree != 1)
    throw_error("calibration runs on one GPU; tensor_parallel_degree is {}",
                o.tensor_parallel_degree);
  if (o.fuse_decode_projections || o.cuda_graphs)
    throw_error(
        "internal: a calibration backend needs fuse_decode_projections and cuda_graphs "
        "off");
}

}  // namespace

int cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

bool cuda_device_available() { return cuda_device_count() > 0; }

// A random-weight benchmark model keeps the quantization load_model requested on its weights
// (option.quantize on a served benchmark model), like a checkpoint's.
std::unique_ptr<Backend> make_cuda_backend(const LoadedModel& model, const CudaBackendOptions& o) {
  check_observer_options(o);
  CudaBackendOptions with_scales = o;
  if (with_scales.kv_scales.empty()) with_scales.kv_scales = layer_kv_scales(model, o.kv_dtype);
  return make_group(model.desc, model.weights, model.random_seed, with_scales);
}

std::unique_ptr<Backend> make_random_cuda_backend(const DecoderDesc& desc,
                                                  const CudaBackendOptions& o, uint64_t seed,
                                                  const LinearQuant& quant) {
  ModelWeightRefs refs = describe_weights(desc);
  if (quant.quantized()) request_quantization(refs, quant);
  check_observer_options(o);
  return make_group(desc, refs, seed, o);
}

}  // namespace lmx
