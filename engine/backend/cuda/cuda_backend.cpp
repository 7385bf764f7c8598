#include "engine/backend/cuda/cuda_backend.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/activation_kind.h"
#include "engine/backend/sample_rows.h"
#include "engine/backend/rope.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
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
  size_t ids = 0, pos = 0, seq = 0, tables = 0, cu_q = 0, rows = 0;  // offsets into packed
};

template <typename T>
class CudaBackend final : public Backend {
 public:
  CudaBackend(const DecoderDesc& desc, DeviceWeights<T> weights, const CudaBackendOptions& opts)
      : desc_(desc), opts_(opts), w_(std::move(weights)) {
    LMX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    if (desc_.positions == PositionKind::Rotary) {
      const auto inv = rope_inv_freq(desc_.rope);
      inv_freq_ = DeviceBuffer<float>(inv.size());
      LMX_CUDA_CHECK(cudaMemcpy(inv_freq_.get(), inv.data(), inv.size() * sizeof(float),
                                cudaMemcpyHostToDevice));
    }
    allocate_scratch();
    allocate_kv();
    norms_folded_ = opts_.fused && opts_.skinny_gemv && opts_.fuse_decode_projections &&
                    desc_.norm == NormKind::RmsNorm && !std::is_same_v<T, float>;
    if (norms_folded_) fold_norm_weights();
    rope_in_qkv_epilogue_ = norms_folded_ && desc_.positions == PositionKind::Rotary &&
                            k::rope_epilogue_supported(desc_.rope.rotary_dim, desc_.head_dim);
  }

  ~CudaBackend() override {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const DecoderDesc& desc() const override { return desc_; }
  const KvCacheShape& kv_shape() const override { return kv_; }
  std::string name() const override { return "cuda"; }
  std::string kv_cache_dtype_name() const override {
    if (opts_.kv_dtype == kernels::KvDtype::fp8_e4m3) return "fp8_e4m3";
    if constexpr (std::is_same_v<T, __half>) return "fp16";
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bf16";
    return "fp32";
  }

  void forward(std::span<const BatchChunk> chunks, std::vector<float>& logits) override {
    const int rows = enqueue(chunks);
    download_logits(rows, logits);
    finish_step();
  }

  // The step, then the draw on the GPU: only ids and log-probs come back (plus the logits rows
  // when asked for).
  void forward_sample(std::span<const BatchChunk> chunks, std::span<const SampleSpec> specs,
                      std::span<SampledToken> out, std::vector<float>* logits) override {
    const int rows = enqueue(chunks);
    check_sample_rows(specs.size(), out.size(), size_t(rows));
    if (logits) download_logits(rows, *logits);
    const PackedSampleRows p = pack_sample_rows(specs);
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
    std::vector<int32_t> ids(size_t(rows), 0);
    std::vector<float> logprobs(size_t(rows), 0.0f);
    download(sample_ids_.get(), ids);
    download(sample_logprobs_.get(), logprobs);
    finish_step();
    for (int i = 0; i < rows; ++i) out[size_t(i)] = {ids[size_t(i)], logprobs[size_t(i)]};
  }

 private:
  using T_ = T;
  static const T* ptr(const DeviceBuffer<T>& b) { return b.empty() ? nullptr : b.get(); }

  static constexpr int kGraphContextMin = 512;

  // Plans the step, copies its metadata and enqueues it (graph replay for decode-only steps when
  // graphs are on). Returns the number of real logits rows (graph padding rows excluded).
  int enqueue(std::span<const BatchChunk> chunks) {
    const bool decode_only = std::all_of(chunks.begin(), chunks.end(), [](const BatchChunk& c) {
      return c.tokens.size() == 1 && c.compute_logits;
    });
    const int bucket = opts_.cuda_graphs && decode_only ? graph_bucket(int(chunks.size())) : 0;
    const StepMeta m = bucket ? plan(chunks, bucket, kGraphContextMin) : plan(chunks, 0, 0);
    upload(m.packed, meta_.get());
    if (bucket)
      run_graph(m);
    else
      run_step(m);
    return bucket ? int(chunks.size()) : m.logit_rows;
  }

  void download_logits(int rows, std::vector<float>& logits) {
    logits.resize(size_t(rows) * desc_.vocab_size);
    download(logits_.get(), logits);
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

  bool skinny(int M, int K) const {
    return opts_.skinny_gemv && !std::is_same_v<T, float> && k::skinny_supported(M, K);
  }

  // y[M, N] = x[M, K] w[N, K]^T: the weight-streaming kernel for decode-sized M, cuBLAS otherwise.
  void linear(const T* x, const T* w, T* y, int M, int N, int K) {
    if constexpr (kSkinnyGemv<T>) {
      if (skinny(M, K)) return k::skinny_linear<T>(x, w, y, M, N, K, stream_);
    }
    k::linear<T>(gemm_, x, w, y, M, N, K, stream_);
  }

  // The decode path that runs the norms inside the projections (see CudaBackendOptions): each
  // layer's attention and MLP norm weights are folded into the columns of the projection that
  // reads the norm's output (qkv, gate/up), once at load; every other path then normalizes with
  // unit weights. The final norm keeps its weight (the LM head may be the tied embedding).
  void fold_norm_weights() {
    const int H = desc_.hidden_size, I = desc_.intermediate_size;
    const int up_rows = desc_.mlp == MlpKind::Gated ? 2 * I : I;
    for (DeviceLayer<T>& L : w_.layers) {
      k::scale_columns<T>(L.qkv_w.get(), L.attn_norm_w.get(), desc_.qkv_size(), H, stream_);
      k::scale_columns<T>(L.up_w.get(), L.mlp_norm_w.get(), up_rows, H, stream_);
    }
    ones_ = DeviceBuffer<T>(size_t(H));
    const std::vector<T> ones(size_t(H), T(1.0f));
    upload(ones, ones_.get());
    LMX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    spdlog::info("decode projections fused: norm weights folded into the qkv and gate/up columns");
  }

  // A layer norm's weight as the norm kernels use it: ones once it is folded.
  const DeviceBuffer<T>& layer_norm_weight(const DeviceBuffer<T>& w) const {
    return norms_folded_ ? ones_ : w;
  }

  // Whether this step's layers run the fused decode projections.
  bool fused_decode(int n) const {
    return norms_folded_ && skinny(n, desc_.hidden_size) && skinny(n, desc_.q_size()) &&
           skinny(n, desc_.intermediate_size);
  }

  // Everything one step enqueues after its metadata is on the device; capturable.
  void run_step(const StepMeta& m) {
    const int32_t* d = meta_.get();
    const int n = m.tokens, H = desc_.hidden_size;
    layout_.max_blocks_per_seq = m.max_blocks;
    mark("embedding");
    k::embedding<T>(d + m.ids, w_.embed.get(), d + m.pos, ptr(w_.position_embed), x_.get(), n, H,
                    stream_);
    const bool fused = fused_decode(n);
    for (int l = 0; l < desc_.num_layers; ++l) {
      if constexpr (kSkinnyGemv<T>) {
        if (fused) {
          run_layer_fused_decode(l, m, d);
          continue;
        }
      }
      run_layer(l, m, d);
    }
    // Final norm (adding the last MLP output unless the down projection did), gather the rows that
    // need logits, LM head in fp32.
    mark("final_norm");
    norm(x_.get(), fused ? nullptr : delta_.get(), w_.final_norm_w, w_.final_norm_b, h_.get(), n);
    mark("lm_head");
    k::gather_rows<T>(h_.get(), d + m.rows, gathered_.get(), m.logit_rows, H, stream_);
    bool head_done = false;
    if constexpr (kSkinnyGemv<T>) {
      if (skinny(m.logit_rows, H)) {
        k::skinny_linear_f32_out<T>(gathered_.get(), w_.head(), logits_.get(), m.logit_rows,
                                    desc_.vocab_size, H, stream_);
        head_done = true;
      }
    }
    if (!head_done)
      k::linear_f32_out<T>(gemm_, gathered_.get(), w_.head(), logits_.get(), m.logit_rows,
                           desc_.vocab_size, H, stream_);
    mark("");  // end of the step
  }

  // Smallest captured batch size that holds `seqs` decode tokens.
  int graph_bucket(int seqs) const {
    for (int b : {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512})
      if (b >= seqs && b <= opts_.max_sequences) return b;
    return 0;  // larger than any bucket: eager
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
    spdlog::info("captured a decode graph for batch {} / context {}", key.first, key.second);
    LMX_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
  }

  // Once per decode batch size: each projection that runs through cuBLAS at `rows` rows gets the
  // fastest algorithm tune_linear finds, timed over every layer's weights (the step's scratch
  // buffers serve as x and y; nothing of a step is in them yet).
  void tune_projections(int rows) {
    if (!opts_.tune_gemms || !tuned_rows_.insert(rows).second) return;
    const int H = desc_.hidden_size, Q = desc_.q_size(), I = desc_.intermediate_size;
    const int up = desc_.mlp == MlpKind::Gated ? 2 * I : I;
    auto every_layer = [&](DeviceBuffer<T> DeviceLayer<T>::*matrix) {
      std::vector<const T*> v;
      for (const DeviceLayer<T>& L : w_.layers) v.push_back((L.*matrix).get());
      return v;
    };
    auto tune = [&](const char* name, const std::vector<const T*>& weights, const T* x, auto* y,
                    int N, int K) {
      if (skinny(rows, K)) return;
      const k::LinearTuning t = k::tune_linear<T>(gemm_, weights.data(), int(weights.size()), x,
                                                  y, rows, N, K, stream_);
      spdlog::info("{} rows, {} ({} x {}): cuBLAS default {:.1f} us, kept {} {:.1f} us ({} tried)",
                   rows, name, N, K, t.default_us, t.lt ? "cuBLASLt" : "the default", t.best_us,
                   t.candidates);
    };
    tune("qkv", every_layer(&DeviceLayer<T>::qkv_w), h_.get(), qkv_.get(), desc_.qkv_size(), H);
    tune("o", every_layer(&DeviceLayer<T>::o_w), attn_.get(), delta_.get(), H, Q);
    tune("up", every_layer(&DeviceLayer<T>::up_w), h_.get(), up_.get(), up, H);
    tune("down", every_layer(&DeviceLayer<T>::down_w), act_.get(), delta_.get(), H, I);
    tune("lm_head", {w_.head()}, gathered_.get(), logits_.get(), desc_.vocab_size, H);
  }

  // residual += delta (when given); out = norm(residual)
  void norm(T* residual, const T* delta, const DeviceBuffer<T>& w, const DeviceBuffer<T>& b, T* out,
            int rows) {
    if (!opts_.fused) {  // generic path: the residual add and the norm as two kernels
      if (delta)
        k::bias_add<T>(delta, nullptr, residual, residual, rows, desc_.hidden_size, stream_);
      if (desc_.norm == NormKind::RmsNorm)
        k::rms_norm<T>(residual, w.get(), out, rows, desc_.hidden_size, desc_.norm_eps, stream_);
      else
        k::layer_norm<T>(residual, w.get(), b.get(), out, rows, desc_.hidden_size, desc_.norm_eps,
                         stream_);
      return;
    }
    if (desc_.norm == NormKind::RmsNorm)
      k::add_rms_norm<T>(residual, delta, w.get(), out, rows, desc_.hidden_size, desc_.norm_eps,
                         stream_);
    else
      k::add_layer_norm<T>(residual, delta, w.get(), b.get(), out, rows, desc_.hidden_size,
                           desc_.norm_eps, stream_);
  }

  void run_layer(int l, const StepMeta& m, const int32_t* d) {
    const DeviceLayer<T>& L = w_.layers[size_t(l)];
    const int n = m.tokens, H = desc_.hidden_size, QKV = desc_.qkv_size(), Q = desc_.q_size();
    const int I = desc_.intermediate_size;
    const bool gated = desc_.mlp == MlpKind::Gated;

    // Attention block. The previous layer's MLP output joins the residual inside the norm.
    mark("norm");
    norm(x_.get(), l == 0 ? nullptr : delta_.get(), layer_norm_weight(L.attn_norm_w), L.attn_norm_b,
         h_.get(), n);
    mark("qkv_proj");
    linear(h_.get(), L.qkv_w.get(), qkv_.get(), n, QKV, H);
    write_rope_kv(l, m, d);
    mark("attention");
    attention(l, m, d);
    mark("o_proj");
    linear(attn_.get(), L.o_w.get(), delta_.get(), n, H, Q);
    if (!L.o_b.empty()) k::bias_add<T>(delta_.get(), L.o_b.get(), nullptr, delta_.get(), n, H, stream_);

    // MLP block.
    mark("norm");
    norm(x_.get(), delta_.get(), layer_norm_weight(L.mlp_norm_w), L.mlp_norm_b, h_.get(), n);
    mark("gate_up_proj");
    linear(h_.get(), L.up_w.get(), up_.get(), n, gated ? 2 * I : I, H);
    mark("activation");
    const T* up_bias = ptr(L.up_b);
    if (!opts_.fused && up_bias) {  // generic path: the bias as its own kernel
      k::bias_add<T>(up_.get(), up_bias, nullptr, up_.get(), n, gated ? 2 * I : I, stream_);
      up_bias = nullptr;
    }
    if (gated)
      k::bias_gated_act<T>(to_kernel(desc_.activation), up_.get(), up_bias, act_.get(), n, I, stream_);
    else
      k::bias_act<T>(to_kernel(desc_.activation), up_.get(), up_bias, act_.get(), n, I, stream_);
    mark("down_proj");
    linear(act_.get(), L.down_w.get(), delta_.get(), n, H, I);
    if (!L.down_b.empty())
      k::bias_add<T>(delta_.get(), L.down_b.get(), nullptr, delta_.get(), n, H, stream_);
  }

  // The decode layer when fused_decode(): x_ (the residual stream) is read by the projections as
  // is and updated in place by their epilogues; no norm, add or activation kernel.
  void run_layer_fused_decode(int l, const StepMeta& m, const int32_t* d) {
    const DeviceLayer<T>& L = w_.layers[size_t(l)];
    const int n = m.tokens, H = desc_.hidden_size, QKV = desc_.qkv_size(), Q = desc_.q_size();
    const int I = desc_.intermediate_size;
    const float eps = desc_.norm_eps;
    if (rope_in_qkv_epilogue_) {  // rope + K/V write in the projection's epilogue
      mark("qkv_proj_rope_kv");
      with_kv_cache(l, [&](auto* kc, auto* vc) {
        k::skinny_linear_rms_rope_kv<T>(x_.get(), eps, L.qkv_w.get(), qkv_.get(), QKV,
                                        ptr(L.qkv_b), d + m.pos, inv_freq_.get(),
                                        desc_.rope.rotary_dim, desc_.num_heads, kc, vc,
                                        d + m.tables, d + m.seq, n, H, layout_, stream_);
      });
    } else {
      mark("qkv_proj");
      k::skinny_linear_rms<T>(x_.get(), eps, L.qkv_w.get(), qkv_.get(), n, QKV, H, stream_);
      write_rope_kv(l, m, d);
    }
    mark("attention");
    attention(l, m, d);
    mark("o_proj");
    k::skinny_linear_add<T>(attn_.get(), L.o_w.get(), ptr(L.o_b), x_.get(), n, H, Q, stream_);
    mark("gate_up_proj");
    if (desc_.mlp == MlpKind::Gated) {
      k::skinny_linear_rms_gated<T>(to_kernel(desc_.activation), x_.get(), eps, L.up_w.get(),
                                    ptr(L.up_b), act_.get(), n, I, H, stream_);
    } else {
      k::skinny_linear_rms<T>(x_.get(), eps, L.up_w.get(), up_.get(), n, I, H, stream_);
      mark("activation");
      k::bias_act<T>(to_kernel(desc_.activation), up_.get(), ptr(L.up_b), act_.get(), n, I,
                     stream_);
    }
    mark("down_proj");
    k::skinny_linear_add<T>(act_.get(), L.down_w.get(), ptr(L.down_b), x_.get(), n, H, I, stream_);
  }

  // Rotary embedding (+ qkv bias) on qkv_ with the K/V write into the cache.
  void write_rope_kv(int l, const StepMeta& m, const int32_t* d) {
    const DeviceLayer<T>& L = w_.layers[size_t(l)];
    const int n = m.tokens, QKV = desc_.qkv_size();
    mark("rope_kv_write");
    const bool rotary = desc_.positions == PositionKind::Rotary;
    const T* qkv_bias = ptr(L.qkv_b);
    if (!opts_.fused && qkv_bias) {  // generic path: the bias as its own kernel
      k::bias_add<T>(qkv_.get(), qkv_bias, nullptr, qkv_.get(), n, QKV, stream_);
      qkv_bias = nullptr;
    }
    with_kv_cache(l, [&](auto* kc, auto* vc) {
      k::rope_write_kv<T>(qkv_.get(), QKV, qkv_bias, d + m.pos,
                          rotary ? inv_freq_.get() : nullptr, rotary ? desc_.rope.rotary_dim : 0,
                          desc_.num_heads, kc, vc, d + m.tables, d + m.seq, n, layout_, stream_);
    });
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

  void attention(int l, const StepMeta& m, const int32_t* d) {
    const T* q = qkv_.get();
    const int QKV = desc_.qkv_size();
    const int window = desc_.sliding_window[size_t(l)];
    const float scale = desc_.attention_scale();
    with_kv_cache(l, [&](const auto* kc, const auto* vc) {
      if constexpr (kTunedAttention<T>) {
        if (!opts_.generic_attention && k::tuned_attention_head_dim(desc_.head_dim) &&
            QKV % 8 == 0) {
          // The leading one-token chunks (decode tokens) through the decode kernel, the rest
          // (prefill chunks) through the prefill kernel: its cu_q entries are absolute token
          // indices, so it takes the chunk list from chunk lead_single on, unchanged.
          if (m.lead_single > 0)
            k::paged_attention_decode<T>(q, QKV, kc, vc, d + m.tables, d + m.seq, d + m.pos,
                                         attn_.get(), m.lead_single, desc_.num_heads, scale, nullptr,
                                         window, layout_, m.max_context, workspace_.get(),
                                         workspace_.size(), stream_);
          if (m.lead_single < m.seqs)
            k::paged_attention_prefill<T>(q, QKV, kc, vc, d + m.tables, d + m.seq, d + m.pos,
                                          d + m.cu_q + m.lead_single, m.seqs - m.lead_single,
                                          m.max_chunk, attn_.get(), desc_.num_heads, scale, nullptr,
                                          window, layout_, stream_);
          return;
        }
      }
      k::paged_attention_generic<T>(q, QKV, kc, vc, d + m.tables, d + m.seq, d + m.pos,
                                    attn_.get(), m.tokens, desc_.num_heads, scale, nullptr, window, layout_,
                                    stream_);
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
      m.logit_rows += c.compute_logits ? 1 : 0;
    }
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
      for (size_t i = 0; i < c.tokens.size(); ++i, ++t) {
        if (c.tokens[i] < 0 || c.tokens[i] >= desc_.vocab_size)
          throw_error("token id {} is outside the vocabulary [0, {})", c.tokens[i], desc_.vocab_size);
        m.packed[m.ids + size_t(t)] = c.tokens[i];
        m.packed[m.pos + size_t(t)] = c.start_position + int32_t(i);
        m.packed[m.seq + size_t(t)] = s;
      }
      if (c.compute_logits) m.packed[m.rows + size_t(row++)] = t - 1;
    }
    m.packed[m.cu_q + size_t(m.seqs)] = t;
    return m;
  }

  void allocate_scratch() {
    const size_t tok = size_t(opts_.max_step_tokens), H = size_t(desc_.hidden_size);
    const size_t I = size_t(desc_.intermediate_size);
    const size_t S = size_t(opts_.max_sequences);
    x_ = DeviceBuffer<T_>(tok * H);
    h_ = DeviceBuffer<T_>(tok * H);
    delta_ = DeviceBuffer<T_>(tok * H);
    qkv_ = DeviceBuffer<T_>(tok * size_t(desc_.qkv_size()));
    attn_ = DeviceBuffer<T_>(tok * size_t(desc_.q_size()));
    up_ = DeviceBuffer<T_>(tok * (desc_.mlp == MlpKind::Gated ? 2 * I : I));
    act_ = DeviceBuffer<T_>(tok * I);
    gathered_ = DeviceBuffer<T_>(S * H);
    logits_ = DeviceBuffer<float>(S * size_t(desc_.vocab_size));
    sample_params_ = DeviceBuffer<kernels::SamplingRow>(S);
    sample_prev_ = DeviceBuffer<int32_t>(S * size_t(desc_.max_position_embeddings));
    sample_len_ = DeviceBuffer<int32_t>(S);
    sample_ids_ = DeviceBuffer<int32_t>(S);
    sample_logprobs_ = DeviceBuffer<float>(S);
    max_blocks_ = desc_.max_position_embeddings / opts_.kv_block_size + 1;
    meta_ = DeviceBuffer<int32_t>(3 * tok + S * size_t(max_blocks_) + 2 * S + 1);
    if constexpr (kTunedAttention<T_>)
      workspace_ = DeviceBuffer<char>(k::paged_attention_decode_workspace_bytes(
          opts_.max_sequences, desc_.num_heads, desc_.num_kv_heads, desc_.head_dim,
          desc_.max_position_embeddings));
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
    spdlog::info("CUDA memory plan: weights {:.2f} GiB, KV cache {} blocks ({:.2f} GiB, {}), "
                 "{:.2f} GiB free before the cache", w_.bytes / 1073741824.0, blocks,
                 double(blocks) * per_block / 1073741824.0, kernels::kv_dtype_name(opts_.kv_dtype),
                 free_bytes / 1073741824.0);
  }

  DecoderDesc desc_;
  CudaBackendOptions opts_;
  DeviceWeights<T> w_;
  KvCacheShape kv_;
  kernels::PagedKvLayout layout_{};
  cudaStream_t stream_ = nullptr;
  k::GemmContext gemm_;
  DeviceBuffer<float> inv_freq_;
  // Per layer [blocks, block_size, kv_heads, head_dim] of T or KvFp8 (with_kv_cache), as bytes.
  std::vector<DeviceBuffer<unsigned char>> k_cache_, v_cache_;
  DeviceBuffer<T> x_, h_, delta_, qkv_, attn_, up_, act_, gathered_;
  bool norms_folded_ = false;  // layer norm weights folded into the projections (fold_norm_weights)
  DeviceBuffer<T> ones_;       // [hidden] the layer norms' weight once folded
  bool rope_in_qkv_epilogue_ = false;  // fused decode: rope + K/V write in the qkv epilogue
  DeviceBuffer<float> logits_;
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

template <typename T>
std::unique_ptr<Backend> build(const DecoderDesc& desc, DeviceWeights<T> w, const CudaBackendOptions& o) {
  return std::make_unique<CudaBackend<T>>(desc, std::move(w), o);
}

}  // namespace

CudaDtype parse_cuda_dtype(const std::string& name) {
  if (name == "fp32") return CudaDtype::F32;
  if (name == "fp16") return CudaDtype::F16;
  if (name == "bf16") return CudaDtype::BF16;
  throw_error("dtype '{}' is not one of fp32, fp16, bf16", name);
}

bool cuda_device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::unique_ptr<Backend> make_cuda_backend(const LoadedModel& model, const CudaBackendOptions& o) {
  if (!cuda_device_available()) throw_error("no CUDA GPU is available on this machine");
  if (model.random_seed) return make_random_cuda_backend(model.desc, o, *model.random_seed);
  switch (o.dtype) {
    case CudaDtype::F32: return build(model.desc, upload_weights<float>(model.weights), o);
    case CudaDtype::F16: return build(model.desc, upload_weights<__half>(model.weights), o);
    case CudaDtype::BF16: return build(model.desc, upload_weights<__nv_bfloat16>(model.weights), o);
  }
  return nullptr;
}

std::unique_ptr<Backend> make_random_cuda_backend(const DecoderDesc& desc,
                                                  const CudaBackendOptions& o, uint64_t seed) {
  if (!cuda_device_available()) throw_error("no CUDA GPU is available on this machine");
  const ModelWeightRefs shapes = describe_weights(desc);
  switch (o.dtype) {
    case CudaDtype::F32: return build(desc, random_weights<float>(shapes, seed), o);
    case CudaDtype::F16: return build(desc, random_weights<__half>(shapes, seed), o);
    case CudaDtype::BF16: return build(desc, random_weights<__nv_bfloat16>(shapes, seed), o);
  }
  return nullptr;
}

}  // namespace lmx
