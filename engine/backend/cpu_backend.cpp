#include "engine/backend/cpu_backend.h"

#include <algorithm>

#include "engine/backend/activation_kind.h"
#include "engine/backend/rope.h"
#include "engine/core/error.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "kernels/rotary.h"

namespace lmx {
namespace {

namespace k = kernels::cpu;

using Buffer = std::vector<float>;

// Weights of one layer, fp32 host, canonical layouts (see engine/model/weight_map.h).
struct CpuLayer {
  Buffer attn_norm_w, attn_norm_b, qkv_w, qkv_b, o_w, o_b;
  Buffer mlp_norm_w, mlp_norm_b, up_w, up_b, down_w, down_b;
};

const float* ptr_or_null(const Buffer& b) { return b.empty() ? nullptr : b.data(); }

Buffer load(const WeightRef& ref) { return ref.present() ? materialize_f32(ref) : Buffer{}; }

class CpuBackend final : public Backend {
 public:
  CpuBackend(const LoadedModel& model, const KvCacheShape& kv) : desc_(model.desc), kv_(kv) {
    if (model.random_seed)
      throw_error("{}: random-weight benchmark models run on the CUDA backend only",
                  model.dir.string());
    if (kv.block_size <= 0 || kv.num_blocks <= 0)
      throw_error("KV cache needs a positive block size and block count (got {} x {})",
                  kv.block_size, kv.num_blocks);
    const ModelWeightRefs& w = model.weights;
    embed_ = load(w.embed);
    position_embed_ = load(w.position_embed);
    final_norm_w_ = load(w.final_norm_weight);
    final_norm_b_ = load(w.final_norm_bias);
    tied_head_ = w.lm_head_tied;
    if (!tied_head_) lm_head_ = load(w.lm_head);
    for (const LayerWeightRefs& L : w.layers) {
      layers_.push_back(CpuLayer{load(L.attn_norm_weight), load(L.attn_norm_bias),
                                 load(L.qkv_weight), load(L.qkv_bias), load(L.o_weight),
                                 load(L.o_bias), load(L.mlp_norm_weight), load(L.mlp_norm_bias),
                                 load(L.up_weight), load(L.up_bias), load(L.down_weight),
                                 load(L.down_bias)});
    }
    if (desc_.positions == PositionKind::Rotary) inv_freq_ = rope_inv_freq(desc_.rope);
    layout_ = {kv.block_size, desc_.num_kv_heads, desc_.head_dim, 0};
    const size_t per_layer = size_t(kv.num_blocks) * kv.block_size * desc_.kv_size();
    k_cache_.assign(size_t(desc_.num_layers), Buffer(per_layer));
    v_cache_.assign(size_t(desc_.num_layers), Buffer(per_layer));
  }

  const DecoderDesc& desc() const override { return desc_; }
  const KvCacheShape& kv_shape() const override { return kv_; }
  std::string name() const override { return "cpu"; }
  std::string kv_cache_dtype_name() const override {
    return kv_.dtype == kernels::KvDtype::fp8_e4m3 ? "fp8_e4m3" : "fp32";
  }

  CpuKvView kv_cache(int layer) const {
    if (layer < 0 || layer >= desc_.num_layers)
      throw_error("layer {} is outside the model's {} layers", layer, desc_.num_layers);
    return {k_cache_[size_t(layer)], v_cache_[size_t(layer)]};
  }

  void forward(std::span<const BatchChunk> chunks, std::vector<float>& logits) override {
    prepare_batch(chunks);
    const int T = int(ids_.size());
    const int H = desc_.hidden_size;
    x_.resize(size_t(T) * H);
    k::embedding(ids_.data(), embed_.data(), positions_.data(),
                 position_embed_.empty() ? nullptr : position_embed_.data(), x_.data(), T, H);
    for (int l = 0; l < desc_.num_layers; ++l) run_layer(l, T);
    compute_logits(logits);
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
      if (c.compute_logits) logit_rows_.push_back(int(ids_.size()) - 1);
    }
  }

  void norm(const Buffer& w, const Buffer& b, const float* in, float* out, int rows) const {
    if (desc_.norm == NormKind::RmsNorm)
      k::rms_norm(in, w.data(), out, rows, desc_.hidden_size, desc_.norm_eps);
    else
      k::layer_norm(in, w.data(), b.data(), out, rows, desc_.hidden_size, desc_.norm_eps);
  }

  void run_layer(int l, int T) {
    const CpuLayer& L = layers_[size_t(l)];
    const int H = desc_.hidden_size, QKV = desc_.qkv_size(), Q = desc_.q_size();
    const int I = desc_.intermediate_size;
    const bool gated = desc_.mlp == MlpKind::Gated;
    h_.resize(size_t(T) * H);
    qkv_.resize(size_t(T) * QKV);
    attn_.resize(size_t(T) * Q);
    up_.resize(size_t(T) * (gated ? 2 * I : I));
    act_.resize(size_t(T) * I);
    delta_.resize(size_t(T) * H);

    // Attention block: x += o_proj(attention(rope(qkv_proj(norm(x)))))
    norm(L.attn_norm_w, L.attn_norm_b, x_.data(), h_.data(), T);
    k::linear(h_.data(), L.qkv_w.data(), ptr_or_null(L.qkv_b), qkv_.data(), T, QKV, H);
    float* q = qkv_.data();
    float* kk = q + Q;
    float* v = kk + desc_.kv_size();
    if (desc_.positions == PositionKind::Rotary) {
      k::rotary(q, QKV, positions_.data(), inv_freq_.data(), T, desc_.num_heads, desc_.head_dim,
                desc_.rope.rotary_dim);
      k::rotary(kk, QKV, positions_.data(), inv_freq_.data(), T, desc_.num_kv_heads,
                desc_.head_dim, desc_.rope.rotary_dim);
    }
    float* kc = k_cache_[size_t(l)].data();
    float* vc = v_cache_[size_t(l)].data();
    k::write_kv(kk, v, QKV, kc, vc, tables_.data(), token_seq_.data(), positions_.data(), T,
                layout_, kv_.dtype);
    k::paged_attention(q, QKV, kc, vc, tables_.data(), token_seq_.data(), positions_.data(),
                       attn_.data(), T, desc_.num_heads, desc_.attention_scale(),
                       /*alibi_slopes=*/nullptr, desc_.sliding_window[size_t(l)], layout_);
    k::linear(attn_.data(), L.o_w.data(), ptr_or_null(L.o_b), delta_.data(), T, H, Q);
    for (size_t i = 0; i < x_.size(); ++i) x_[i] += delta_[i];

    // MLP block: x += down(act(up(norm(x))))
    norm(L.mlp_norm_w, L.mlp_norm_b, x_.data(), h_.data(), T);
    k::linear(h_.data(), L.up_w.data(), ptr_or_null(L.up_b), up_.data(), T, gated ? 2 * I : I, H);
    if (gated)
      k::gated_act(to_kernel(desc_.activation), up_.data(), act_.data(), T, I);
    else
      k::act(to_kernel(desc_.activation), up_.data(), act_.data(), T, I);
    k::linear(act_.data(), L.down_w.data(), ptr_or_null(L.down_b), delta_.data(), T, H, I);
    for (size_t i = 0; i < x_.size(); ++i) x_[i] += delta_[i];
  }

  void compute_logits(std::vector<float>& logits) {
    const int H = desc_.hidden_size, V = desc_.vocab_size;
    const int rows = int(logit_rows_.size());
    h_.resize(size_t(rows) * H);
    for (int r = 0; r < rows; ++r)
      std::copy_n(x_.begin() + ptrdiff_t(logit_rows_[size_t(r)]) * H, H, h_.begin() + ptrdiff_t(r) * H);
    norm(final_norm_w_, final_norm_b_, h_.data(), h_.data(), rows);
    logits.resize(size_t(rows) * V);
    const float* head = tied_head_ ? embed_.data() : lm_head_.data();
    k::linear(h_.data(), head, nullptr, logits.data(), rows, V, H);
  }

  DecoderDesc desc_;
  KvCacheShape kv_;
  kernels::PagedKvLayout layout_{};

  Buffer embed_, position_embed_, final_norm_w_, final_norm_b_, lm_head_;
  bool tied_head_ = false;
  std::vector<CpuLayer> layers_;
  std::vector<float> inv_freq_;
  std::vector<Buffer> k_cache_, v_cache_;  // per layer [blocks, block_size, kv_heads, head_dim]

  // Per-forward scratch, reused across steps.
  std::vector<int32_t> ids_, positions_, token_seq_, tables_;
  std::vector<int> logit_rows_;
  Buffer x_, h_, qkv_, attn_, up_, act_, delta_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, const KvCacheShape& kv) {
  return std::make_unique<CpuBackend>(model, kv);
}

CpuKvView cpu_kv_cache(const Backend& backend, int layer) {
  const auto* cpu = dynamic_cast<const CpuBackend*>(&backend);
  if (cpu == nullptr)
    throw_error("cpu_kv_cache: the {} backend is not the CPU backend", backend.name());
  return cpu->kv_cache(layer);
}

}  // namespace lmx
