#include "engine/backend/cpu_backend.h"

#include <algorithm>
#include <cstring>

#include "engine/backend/activation_kind.h"
#include "engine/backend/alibi.h"
#include "engine/backend/cpu_smoothing_scorer.h"
#include "engine/backend/rope.h"
#include "engine/backend/sample_rows.h"
#include "engine/core/error.h"
#include "engine/model/kv_scales.h"
#include "engine/model/quantization.h"
#include "engine/model/shard.h"
#include "engine/parallel/communicator.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/calibration.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/kv_dtype.h"
#include "kernels/linear.h"
#include "kernels/norm.h"
#include "kernels/rotary.h"
#include "kernels/sampling.h"
#include "quant/fp8.h"
#include "quant/int8.h"
#include "quant/w8a8.h"

namespace lmx {
namespace {

namespace k = kernels::cpu;

using Buffer = std::vector<float>;
using CpuLinear = Linear<Buffer>;
using CpuNorm = Norm<Buffer>;

const float* ptr_or_null(const Buffer& b) { return b.empty() ? nullptr : b.data(); }

// The kernels' view of a projection: weight [out, in] and bias [out] (or null), host fp32.
kernels::LinearWeights<float> view(const CpuLinear& L) {
  return {L.weight.data(), ptr_or_null(L.bias), int(L.out), int(L.in)};
}

// A quantized projection's view (quant/int8.h): int8 [out, in], fp32 scales [out, in / group].
quant::W8A16Weights int8_view(const CpuLinear& L) {
  return {L.q.values.data(), L.q.scales.data(), ptr_or_null(L.bias), int(L.out), int(L.in),
          int(L.quant.group_for(L.in))};
}

// A W8A8 projection's view (quant/w8a8.h): int8 [out, in], fp32 scales [out].
quant::W8A8Weights w8a8_view(const CpuLinear& L) {
  return {L.q.values.data(), L.q.scales.data(), ptr_or_null(L.bias), int(L.out), int(L.in)};
}

// An fp8 projection's view (quant/fp8.h): E4M3 codes [out, in], fp32 scales [out, in / group]
// (one a row unless a block-scaled checkpoint's).
quant::Fp8Weights fp8_view(const CpuLinear& L) {
  return {reinterpret_cast<const uint8_t*>(L.q.values.data()),
          L.q.scales.data(),
          ptr_or_null(L.bias),
          int(L.out),
          int(L.in),
          int(L.quant.group_for(L.in))};
}

// smoothquant: W [out, in] <- W diag(s), so that (x diag(1/s)) (W diag(s))^T = x W^T; the 1/s
// goes into the preceding norm (fold_smoothing_into_norms) or, kept here, onto the activations.
void smooth_weight(CpuLinear& L, const std::string& what) {
  const std::vector<float>& s = *L.quant.smooth;
  if (int64_t(s.size()) != L.in)
    throw_error("{}: {} smoothing factors for {} input columns", what, s.size(), L.in);
  for (int64_t o = 0; o < L.out; ++o)
    for (int64_t k = 0; k < L.in; ++k) L.weight[size_t(o * L.in + k)] *= s[size_t(k)];
  if (!L.quant.smooth_in_norm) {
    L.q.inv_smooth.resize(s.size());
    for (size_t k = 0; k < s.size(); ++k) L.q.inv_smooth[k] = 1.0f / s[k];
  }
}

// option.quantize=dynamic_int8 / smoothquant: a projection the description marks (engine/model/
// quantization.h, smoothquant/) is quantized from its fp32 copy as soon as it is materialized
// (smoothed first for W8A8), and the copy freed, so loading holds one projection in fp32 at a
// time. Under tensor parallelism each rank quantizes its own slice (per-channel scales then span
// the rank's columns of a row-parallel projection). A tied head (empty weight here) is done by
// quantize_tied_head.
void quantize_linear(CpuLinear& L, const std::string& label, TensorParallelRank tp) {
  if (L.weight.empty()) return;
  const std::string what =
      tp.ranks > 1 ? fmt::format("{} (tensor-parallel rank {} of {})", label, tp.rank, tp.ranks)
                   : label;
  // Smoothing alone (kind None) is exact in fp32: how the tests check the folding.
  if (L.quant.smooth) smooth_weight(L, what);
  if (!L.quant.quantized()) return;
  if (L.quant.kind == QuantKind::Fp8) {  // E4M3 codes as bytes in values
    L.q.values.resize(size_t(L.out * L.in));
    auto* codes = reinterpret_cast<uint8_t*>(L.q.values.data());
    const int64_t group = L.quant.group_for(L.in);
    if (const auto& given = L.quant.checkpoint_scales) {  // the checkpoint's codes, as stored
      if (group <= 0 || L.in % group != 0 || int64_t(given->size()) != L.out * (L.in / group))
        throw_error("{}: {} fp8 scales for {} rows of {} input columns in groups of {}", what,
                    given->size(), L.out, L.in, group);
      for (size_t i = 0; i < L.weight.size(); ++i) codes[i] = kernels::cpu::encode_e4m3(L.weight[i]);
      L.q.scales = *given;
    } else {
      if (group != L.in)  // the quantizer below makes one scale a row
        throw_error(
            "{}: fp8 scales in groups of {} input columns come from a block-scaled "
            "checkpoint only",
            what, group);
      L.q.scales.resize(size_t(L.out));
      quant::cpu::quantize_rows_e4m3(what.c_str(), L.weight.data(), L.out, L.in, codes,
                                     L.q.scales.data());
    }
    Buffer().swap(L.weight);
    return;
  }
  if (L.quant.kind == QuantKind::W8A8 && L.in > quant::kW8A8MaxIn)
    throw_error("{}: {} input columns would overflow W8A8's int32 sums (at most {})", what, L.in,
                quant::kW8A8MaxIn);
  const int64_t group = L.quant.group_for(L.in);
  quant::check_int8_shape(what.c_str(), L.out, L.in, group);
  L.q.values.resize(size_t(L.out * L.in));
  L.q.scales.resize(size_t(L.out * (L.in / group)));
  quant::cpu::quantize_int8(what.c_str(), L.weight.data(), L.out, L.in, group, L.q.values.data(),
                            L.q.scales.data());
  Buffer().swap(L.weight);
}

// A tied LM head gets a quantized copy of the embedding; the embedding itself stays fp32.
void quantize_tied_head(ModelWeights<Buffer>& w, TensorParallelRank tp) {
  if (!w.lm_head.quant.quantized() || !w.lm_head_tied) return;
  w.lm_head.weight = w.embed;
  w.lm_head_tied = false;
  quantize_linear(w.lm_head, "lm_head", tp);
}

// norm(x) diag(1/s) = norm with weight / s and bias / s: the exact fold of a projection's
// smoothing (smooth_in_norm) into the norm that produces its input.
void fold_smoothing_into_norms(ModelWeights<Buffer>& w, bool shared_block_norm) {
  for_each_smoothed_norm(w, shared_block_norm, [](Norm<Buffer>& n, const std::vector<float>& s) {
    for (size_t j = 0; j < s.size(); ++j) {
      n.weight[j] /= s[j];
      if (!n.bias.empty()) n.bias[j] /= s[j];
    }
  });
}

class CpuBackend final : public Backend {
 public:
  // With a communicator the backend is one tensor-parallel rank: it holds and computes its slice
  // (engine/model/shard.h) and meets the other ranks in an all-reduce after each row-parallel
  // projection and an all-gather of the vocabulary-parallel logits.
  CpuBackend(const LoadedModel& model, const KvCacheShape& kv, Communicator* comm,
             ActivationObserver* observer = nullptr)
      : desc_(model.desc),
        kv_(kv),
        comm_(comm),
        observer_(observer),
        tp_{comm ? comm->rank() : 0, comm ? comm->size() : 1},
        local_(rank_desc(desc_, tp_)) {
    if (model.random_seed)
      throw_error("{}: random-weight benchmark models run on the CUDA backend only",
                  model.dir.string());
    if (kv.block_size <= 0 || kv.num_blocks <= 0)
      throw_error("KV cache needs a positive block size and block count (got {} x {})",
                  kv.block_size, kv.num_blocks);
    w_ = map_weights<Buffer>(shard_weights(model.weights, desc_, tp_),
                             [](const WeightRef& ref, WeightKind) {
                               return ref.present() ? materialize_f32(ref) : Buffer{};
                             },
                             [&](CpuLinear& L, const std::string& label, const auto*) {
                               quantize_linear(L, label, tp_);
                             });
    quantize_tied_head(w_, tp_);
    fold_smoothing_into_norms(w_, desc_.shared_block_norm);
    if (desc_.positions == PositionKind::Rotary) inv_freq_ = rope_inv_freq(desc_.rope);
    if (desc_.positions == PositionKind::Alibi) {  // this rank's heads' slopes
      const auto slopes = alibi_slopes(desc_.num_heads);
      alibi_.assign(slopes.begin() + tp_.rank * local_.num_heads,
                    slopes.begin() + (tp_.rank + 1) * local_.num_heads);
    }
    layout_ = {kv.block_size, local_.num_kv_heads, desc_.head_dim, 0};
    kv_scales_ = layer_kv_scales(model, kv.dtype);
    const size_t per_layer = size_t(kv.num_blocks) * kv.block_size * local_.kv_size();
    k_cache_.assign(size_t(desc_.num_layers), Buffer(per_layer));
    v_cache_.assign(size_t(desc_.num_layers), Buffer(per_layer));
  }

  const DecoderDesc& desc() const override { return desc_; }
  const KvCacheShape& kv_shape() const override { return kv_; }
  std::string name() const override { return "cpu"; }
  // One rank only: the other ranks of a group would not know which rows to compute.
  bool supports_all_logits() const override { return tp_.ranks == 1; }

  // A calibration backend's (one with an observer): the alpha search over its fp32 weights.
  SmoothingScorer* smoothing_scorer() override {
    if (!observer_) return nullptr;
    if (!scorer_)
      scorer_ = std::make_unique<CpuSmoothingScorer>([this](int l, LinearSlot slot) {
        const CpuLinear& lin = slot_linear(w_.layers.at(size_t(l)), slot);
        if (lin.weight.empty())
          throw_error("alpha search: layer {} projection {} is not held unquantized", l, int(slot));
        return view(lin);
      });
    return scorer_.get();
  }
  std::string kv_cache_dtype_name() const override {
    return kv_.dtype == kernels::KvDtype::fp8_e4m3 ? "fp8_e4m3" : "fp32";
  }

  CpuKvView kv_cache(int layer) const {
    if (layer < 0 || layer >= desc_.num_layers)
      throw_error("layer {} is outside the model's {} layers", layer, desc_.num_layers);
    return {k_cache_[size_t(layer)], v_cache_[size_t(layer)]};
  }

  void forward(std::span<const BatchChunk> chunks, std::vector<float>& logits) override {
    run_layers(chunks);
    if (tp_.ranks == 1) {
      logits.resize(logit_rows_.size() * size_t(desc_.vocab_size));
      head(head_input(), logits.data(), int(logit_rows_.size()));
      return;
    }
    rank_logits();
    gather_logits(logits);
  }

  // Tensor parallelism: rows that draw_without_gather are drawn from every rank's own logits.
  bool draws_sharded() const override { return tp_.ranks > 1; }

  void forward_sample(std::span<const BatchChunk> chunks, std::span<const SampleSpec> rows,
                      std::span<SampledToken> out, std::vector<float>* logits) override {
    if (!draws_sharded() || !draw_without_gather(rows, desc_.vocab_size))
      return Backend::forward_sample(chunks, rows, out, logits);
    std::vector<kernels::SamplingRow> params;
    for (const SampleSpec& r : rows) params.push_back(r.params);
    run_layers(chunks);
    check_sample_rows(rows.size(), out.size(), logit_rows_.size());
    const std::vector<kernels::DrawPartial> parts = draw_together(params);
    std::vector<int32_t> ids(rows.size());
    std::vector<float> logprobs(rows.size());
    k::combine_draws(parts.data(), tp_.ranks, int(rows.size()), ids.data(), logprobs.data());
    for (size_t i = 0; i < rows.size(); ++i) out[i] = {ids[i], logprobs[i]};
  }

  void forward_sample_discard(std::span<const BatchChunk> chunks,
                              std::span<const kernels::SamplingRow> params) override {
    run_layers(chunks);
    check_sample_rows(params.size(), params.size(), logit_rows_.size());
    draw_together(params);
  }

 private:
  // Flattens the chunks into per-token ids, positions and sequence rows, plus one row of block
  // table per chunk, validating ids, positions and block coverage.
  void prepare_batch(std::span<const BatchChunk> chunks) {
    ids_.clear();
    positions_.clear();
    token_seq_.clear();
    logit_rows_.clear();
    size_t max_blocks = 1;
    for (const BatchChunk& c : chunks) max_blocks = std::max(max_blocks, c.block_table.size());
    layout_.max_blocks_per_seq = int(max_blocks);
    tables_.assign(chunks.size() * max_blocks, 0);
    for (size_t s = 0; s < chunks.size(); ++s) {
      const BatchChunk& c = chunks[s];
      if (c.tokens.empty()) throw_error("batch chunk {} has no tokens", s);
      const int end = c.start_position + int(c.tokens.size());
      if (c.start_position < 0 || end > desc_.max_position_embeddings)
        throw_error("sequence positions [{}, {}) exceed the model's {} positions", c.start_position,
                    end, desc_.max_position_embeddings);
      if (int(c.block_table.size()) * kv_.block_size < end)
        throw_error("block table of chunk {} covers {} positions, needs {}", s,
                    c.block_table.size() * kv_.block_size, end);
      for (int32_t b : c.block_table)
        if (b < 0 || b >= kv_.num_blocks) throw_error("KV block id {} out of range", b);
      std::copy(c.block_table.begin(), c.block_table.end(), tables_.begin() + s * max_blocks);
      for (size_t i = 0; i < c.tokens.size(); ++i) {
        if (c.tokens[i] < 0 || c.tokens[i] >= desc_.vocab_size)
          throw_error("token id {} is outside the vocabulary [0, {})", c.tokens[i],
                      desc_.vocab_size);
        ids_.push_back(c.tokens[i]);
        positions_.push_back(c.start_position + int(i));
        token_seq_.push_back(int32_t(s));
      }
      if (c.all_logits) {
        if (!supports_all_logits())
          throw_error("batch chunk {} asks for all_logits, which a tensor-parallel rank cannot give", s);
        for (size_t i = c.tokens.size(); i > 0; --i) logit_rows_.push_back(int(ids_.size() - i));
      } else if (c.compute_logits) {
        logit_rows_.push_back(int(ids_.size()) - 1);
      }
    }
  }

  // The layer program (docs/model-layer.md): the CPU backend's one interpretation of the
  // DecoderDesc. x_ [T, hidden] is the residual stream.

  // x_ = token embedding (projected to hidden when embed_dim differs) + learned position rows,
  // then the embedding norm.
  void embed(int T) {
    const int H = desc_.hidden_size, E = desc_.embed_dim;
    const float* pos_table = position_table();
    x_.resize(size_t(T) * H);
    if (!desc_.projects_embeddings()) {
      k::embedding(ids_.data(), w_.embed.data(), positions_.data(), pos_table, x_.data(), T, H);
    } else {
      h_.resize(size_t(T) * E);
      k::embedding(ids_.data(), w_.embed.data(), nullptr, nullptr, h_.data(), T, E);
      linear(w_.project_in, h_.data(), x_.data(), T);
      if (pos_table) {
        delta_.resize(size_t(T) * H);
        k::embedding(positions_.data(), pos_table, nullptr, nullptr, delta_.data(), T, H);
        add(x_, delta_.data());
      }
    }
    if (desc_.embedding_norm) norm(w_.embed_norm, x_.data(), x_.data(), T);
  }

  // Row p of the learned position table (OPT's rows start at its offset); null without one.
  const float* position_table() const {
    if (desc_.positions != PositionKind::LearnedAbsolute) return nullptr;
    return w_.position_embed.data() + size_t(desc_.position_offset) * desc_.hidden_size;
  }

  // y [rows, out] = x [rows, in] · W^T + b, as the Linear is stored: fp32, W8A16 (dequant(W),
  // fp32 accumulation) or W8A8 (per-token int8 activations, int32 sums, scaled back to fp32).
  void linear(const CpuLinear& L, const float* x, float* y, int rows) const {
    switch (L.quant.kind) {
      case QuantKind::None:
        if (!L.q.inv_smooth.empty()) return smoothed_linear(L, x, y, rows);
        return k::linear(x, view(L), y, rows);
      case QuantKind::W8A16PerChannel:
      case QuantKind::W8A16Grouped:
        return quant::cpu::w8a16_linear(x, int8_view(L), y, rows);
      case QuantKind::W8A8:
        return quant::cpu::w8a8_linear(x, w8a8_view(L), y, rows, ptr_or_null(L.q.inv_smooth));
      case QuantKind::Fp8:
        return quant::cpu::fp8_linear(x, fp8_view(L), y, rows);
    }
  }

  // An fp32 projection with an explicit smoothing: (x diag(1/s)) (W diag(s))^T. Only tests ask
  // for it (smoothing without quantization), so the scaled copy of x is not worth a scratch.
  static void smoothed_linear(const CpuLinear& L, const float* x, float* y, int rows) {
    std::vector<float> scaled(x, x + int64_t(rows) * L.in);
    for (size_t i = 0; i < scaled.size(); ++i) scaled[i] *= L.q.inv_smooth[i % size_t(L.in)];
    k::linear(scaled.data(), view(L), y, rows);
  }

  // Shows an observer (calibration) the input x [rows, in] of layer l's projection `slot`.
  void observe(int l, LinearSlot slot, const float* x, int rows, int64_t in) {
    if (!observer_) return;
    observed_max_.assign(size_t(in), 0.0f);
    kernels::cpu::column_abs_max(x, rows, int(in), int(in), observed_max_.data());
    const int head = std::min(rows, std::max(0, observer_->rows_wanted(l, slot)));
    observer_->observe(l, slot, {rows, int(in), observed_max_.data(), x, head});
  }

  // Shows an observer the K and V [rows, width] (row stride `ld`) layer l is about to cache.
  void observe_kv(int l, const float* k, const float* v, int rows, int width, int ld) {
    if (!observer_) return;
    float max[2];
    for (int i = 0; i < 2; ++i) {
      observed_max_.assign(size_t(width), 0.0f);
      kernels::cpu::column_abs_max(i == 0 ? k : v, rows, width, ld, observed_max_.data());
      max[i] = kernels::cpu::max_or_nan(observed_max_.data(), observed_max_.size());
    }
    observer_->observe_kv(l, max[0], max[1]);
  }

  // logits [rows, lm_head.out] = LM head (x [rows, embed_dim]): its weight may be the tied
  // embedding (head_weight()); shape, bias and quantization are lm_head's.
  void head(const float* x, float* logits, int rows) const {
    if (w_.lm_head.quant.quantized()) return linear(w_.lm_head, x, logits, rows);
    const kernels::LinearWeights<float> weights{w_.head_weight().data(), ptr_or_null(w_.lm_head.bias),
                                                int(w_.lm_head.out), int(w_.lm_head.in)};
    k::linear(x, weights, logits, rows);
  }

  void norm(const CpuNorm& n, const float* in, float* out, int rows) const {
    if (desc_.norm == NormKind::RmsNorm)
      k::rms_norm(in, n.weight.data(), out, rows, desc_.hidden_size, desc_.norm_eps);
    else
      k::layer_norm(in, n.weight.data(), n.bias.data(), out, rows, desc_.hidden_size,
                    desc_.norm_eps);
  }

  static void add(Buffer& x, const float* delta) {
    for (size_t i = 0; i < x.size(); ++i) x[i] += delta[i];
  }

  void run_layer(const LayerWeights<Buffer>& L, int l, int T) {
    const int H = desc_.hidden_size;
    h_.resize(size_t(T) * H);
    delta_.resize(size_t(T) * H);
    const CpuNorm& mlp_norm = desc_.shared_block_norm ? L.attn_norm : L.mlp_norm;
    if (desc_.norm_placement == NormPlacement::Post) {  // x = norm(x + block(x))
      attention_block(L, l, x_.data(), delta_.data(), T);
      add(x_, delta_.data());
      norm(L.attn_norm, x_.data(), x_.data(), T);
      mlp_block(L, l, x_.data(), delta_.data(), T);
      add(x_, delta_.data());
      norm(mlp_norm, x_.data(), x_.data(), T);
    } else if (desc_.parallel_residual) {  // x = x + attn(norm1(x)) + mlp(norm2(x))
      norm(L.attn_norm, x_.data(), h_.data(), T);
      attention_block(L, l, h_.data(), delta_.data(), T);
      if (!desc_.shared_block_norm) norm(mlp_norm, x_.data(), h_.data(), T);
      add(x_, delta_.data());
      mlp_block(L, l, h_.data(), delta_.data(), T);
      add(x_, delta_.data());
    } else {  // x = r + block(norm(x)), r = x or (residual_from_norm) norm(x)
      for (const bool attention : {true, false}) {
        norm(attention ? L.attn_norm : mlp_norm, x_.data(), h_.data(), T);
        if (attention)
          attention_block(L, l, h_.data(), delta_.data(), T);
        else
          mlp_block(L, l, h_.data(), delta_.data(), T);
        if (desc_.residual_from_norm) x_ = h_;
        add(x_, delta_.data());
      }
    }
  }

  // A row-parallel projection (o, down): each rank's partial output, summed over the ranks.
  void row_parallel(const CpuLinear& L, const float* x, float* y, int rows) {
    linear(L, x, y, rows);
    if (tp_.ranks > 1) comm_->all_reduce_sum(y, size_t(rows) * size_t(L.out));
  }

  // out [T, hidden] = o_proj(attention(rope(qkv_proj(in)))), appending the K/V to layer l's cache.
  // Under tensor parallelism the rank's heads (local_), o_proj summed over the ranks.
  void attention_block(const LayerWeights<Buffer>& L, int l, const float* in, float* out, int T) {
    const int QKV = local_.qkv_size(), Q = local_.q_size();
    qkv_.resize(size_t(T) * QKV);
    attn_.resize(size_t(T) * Q);
    observe(l, LinearSlot::Qkv, in, T, L.qkv.in);
    linear(L.qkv, in, qkv_.data(), T);
    float* q = qkv_.data();
    float* kk = q + Q;
    float* v = kk + local_.kv_size();
    if (desc_.positions == PositionKind::Rotary) {
      k::rotary(q, QKV, positions_.data(), inv_freq_.data(), T, local_.num_heads, desc_.head_dim,
                desc_.rope.rotary_dim);
      k::rotary(kk, QKV, positions_.data(), inv_freq_.data(), T, local_.num_kv_heads,
                desc_.head_dim, desc_.rope.rotary_dim);
    }
    observe_kv(l, kk, v, T, local_.kv_size(), QKV);
    float* kc = k_cache_[size_t(l)].data();
    float* vc = v_cache_[size_t(l)].data();
    kernels::PagedKvLayout layout = layout_;
    layout.scale = kv_scales_[size_t(l)];
    k::write_kv(kk, v, QKV, kc, vc, tables_.data(), token_seq_.data(), positions_.data(), T, layout,
                kv_.dtype);
    k::paged_attention(q, QKV, kc, vc, tables_.data(), token_seq_.data(), positions_.data(),
                       attn_.data(), T, local_.num_heads, desc_.attention_scale(),
                       alibi_.empty() ? nullptr : alibi_.data(), desc_.sliding_window[size_t(l)],
                       layout);
    observe(l, LinearSlot::O, attn_.data(), T, L.o.in);
    row_parallel(L.o, attn_.data(), out, T);
  }

  // out [T, hidden] = down(act(up(in))), gated or plain (the rank's slice of the intermediate
  // rows, down summed over the ranks).
  void mlp_block(const LayerWeights<Buffer>& L, int l, const float* in, float* out, int T) {
    const int I = local_.intermediate_size;
    up_.resize(size_t(T) * local_.up_rows());
    act_.resize(size_t(T) * I);
    observe(l, LinearSlot::Up, in, T, L.up.in);
    linear(L.up, in, up_.data(), T);
    if (desc_.mlp == MlpKind::Gated)
      k::gated_act(to_kernel(desc_.activation), up_.data(), act_.data(), T, I);
    else
      k::act(to_kernel(desc_.activation), up_.data(), act_.data(), T, I);
    observe(l, LinearSlot::Down, act_.data(), T, L.down.in);
    row_parallel(L.down, act_.data(), out, T);
  }

  // The step's chunks through every layer; the logits rows are logit_rows_.
  void run_layers(std::span<const BatchChunk> chunks) {
    prepare_batch(chunks);
    const int T = int(ids_.size());
    embed(T);
    for (int l = 0; l < desc_.num_layers; ++l) run_layer(w_.layers[size_t(l)], l, T);
  }

  // The LM head's input for the rows that want logits: final norm, project_out. [rows, embed_dim]
  const float* head_input() {
    const int H = desc_.hidden_size, E = desc_.embed_dim;
    const int rows = int(logit_rows_.size());
    h_.resize(size_t(rows) * H);
    for (int r = 0; r < rows; ++r)
      std::copy_n(x_.begin() + ptrdiff_t(logit_rows_[size_t(r)]) * H, H, h_.begin() + ptrdiff_t(r) * H);
    if (desc_.final_norm) norm(w_.final_norm, h_.data(), h_.data(), rows);
    if (!desc_.projects_embeddings()) return h_.data();
    delta_.resize(size_t(rows) * E);
    linear(w_.project_out, h_.data(), delta_.data(), rows);
    return delta_.data();
  }

  // Vocabulary-parallel head: local_logits_ = this rank's [rows, per] logits, vocabulary ids
  // [rank * per, (rank + 1) * per) (ids past the vocabulary are padding).
  void rank_logits() {
    local_logits_.resize(logit_rows_.size() * size_t(w_.lm_head.out));
    head(head_input(), local_logits_.data(), int(logit_rows_.size()));
  }

  // logits [rows, vocab] from every rank's local_logits_, gathered as [ranks][rows, per] (the
  // padding past the vocabulary dropped).
  void gather_logits(std::vector<float>& logits) {
    const size_t V = size_t(desc_.vocab_size), per = size_t(w_.lm_head.out);
    const size_t rows = logit_rows_.size();
    gathered_.resize(size_t(tp_.ranks) * local_logits_.size());
    comm_->all_gather(local_logits_.data(), gathered_.data(), local_logits_.size());
    logits.resize(rows * V);
    for (size_t r = 0; r < rows; ++r)
      for (size_t v = 0; v < V; ++v)
        logits[r * V + v] = gathered_[(v / per) * local_logits_.size() + r * per + v % per];
  }

  // The rows' draws from this rank's logits: every rank's partials [ranks, rows]
  // (kernels/sampling.h), gathered instead of the logits.
  std::vector<kernels::DrawPartial> draw_together(std::span<const kernels::SamplingRow> params) {
    rank_logits();
    const int rows = int(params.size()), per = int(w_.lm_head.out);
    const VocabSlice ids = rank_vocab_slice(desc_.vocab_size, tp_);
    std::vector<kernels::DrawPartial> mine(static_cast<size_t>(rows)), all(size_t(tp_.ranks) * mine.size());
    k::draw_partials(local_logits_.data(), rows, per, ids.cols, ids.first, params.data(),
                     mine.data());
    // Sent as floats (the communicator's element type), bit for bit.
    constexpr size_t kFloats = sizeof(kernels::DrawPartial) / sizeof(float);
    Buffer words(mine.size() * kFloats), gathered(all.size() * kFloats);
    std::memcpy(words.data(), mine.data(), mine.size() * sizeof(kernels::DrawPartial));
    comm_->all_gather(words.data(), gathered.data(), words.size());
    std::memcpy(all.data(), gathered.data(), all.size() * sizeof(kernels::DrawPartial));
    return all;
  }

  DecoderDesc desc_;  // the model's (what desc() reports)
  KvCacheShape kv_;
  Communicator* comm_;     // null: the whole model on one rank
  ActivationObserver* observer_;  // null, or calibration's (sees every projection's input)
  Buffer observed_max_;           // its column maxima, [in]
  std::unique_ptr<CpuSmoothingScorer> scorer_;  // its alpha search, made when first asked
  TensorParallelRank tp_;
  DecoderDesc local_;      // this rank's heads and intermediate slice (engine/model/shard.h)
  Buffer local_logits_, gathered_;  // tensor parallelism: this rank's and every rank's logits
  kernels::PagedKvLayout layout_{};
  std::vector<kernels::KvScale> kv_scales_;  // [layers]: layer l's cache scales (fp8; else 1)

  ModelWeights<Buffer> w_;   // fp32, canonical layouts (engine/model/model_weights.h)
  std::vector<float> inv_freq_;  // [rotary_dim / 2], rotary positions
  std::vector<float> alibi_;     // [heads], ALiBi positions
  std::vector<Buffer> k_cache_, v_cache_;  // per layer [blocks, block_size, kv_heads, head_dim]

  // Per-forward scratch, reused across steps.
  std::vector<int32_t> ids_, positions_, token_seq_, tables_;
  std::vector<int> logit_rows_;
  Buffer x_, h_, qkv_, attn_, up_, act_, delta_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, const KvCacheShape& kv) {
  return std::make_unique<CpuBackend>(model, kv, nullptr);
}

std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, const KvCacheShape& kv,
                                          ActivationObserver& observer) {
  return std::make_unique<CpuBackend>(model, kv, nullptr, &observer);
}

std::unique_ptr<Backend> make_cpu_rank_backend(const LoadedModel& model, const KvCacheShape& kv,
                                               Communicator& comm, ActivationObserver* observer) {
  return std::make_unique<CpuBackend>(model, kv, &comm, observer);
}

CpuKvView cpu_kv_cache(const Backend& backend, int layer) {
  const auto* cpu = dynamic_cast<const CpuBackend*>(&backend);
  if (cpu == nullptr)
    throw_error("cpu_kv_cache: the {} backend is not the CPU backend", backend.name());
  return cpu->kv_cache(layer);
}

}  // namespace lmx
