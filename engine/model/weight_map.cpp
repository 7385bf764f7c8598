#include "engine/model/weight_map.h"

#include <fmt/format.h>

#include "engine/core/error.h"

namespace lmx {
namespace {

std::string layer_name(const std::string& pattern, int layer) {
  return fmt::format(fmt::runtime(pattern), layer);
}

class Resolver {
 public:
  Resolver(const Checkpoint& ckpt, const TensorNames& names) : ckpt_(ckpt), names_(names) {}

  const TensorView* lookup(const std::string& name) const {
    if (const TensorView* t = ckpt_.find(name)) return t;
    const std::string& prefix = names_.optional_prefix;
    if (!prefix.empty() && name.starts_with(prefix)) return ckpt_.find(name.substr(prefix.size()));
    return nullptr;
  }

  const TensorView& require(const std::string& name) const {
    const TensorView* t = lookup(name);
    if (!t) throw_error("missing tensor '{}' in the checkpoint at {}", name, ckpt_.dir().string());
    if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16)
      throw_error("tensor '{}' has dtype {}, expected F32, F16 or BF16", name,
                  dtype_name(t->dtype));
    return *t;
  }

  // `rows` splits the canonical rows among the parts (one entry per part); `cols` == 0 for vectors.
  WeightRef matrix(const std::vector<std::string>& part_names, const std::vector<int64_t>& rows,
                   int64_t cols, bool transposed) const {
    if (part_names.size() != rows.size())
      throw_error("internal: {} parts for {} row groups", part_names.size(), rows.size());
    WeightRef ref;
    ref.name = part_names.front();
    ref.transposed = transposed && cols > 0;
    int64_t total = 0;
    for (size_t i = 0; i < part_names.size(); ++i) {
      const TensorView& t = require(part_names[i]);
      std::vector<int64_t> expected;
      if (cols == 0) expected = {rows[i]};
      else if (ref.transposed) expected = {cols, rows[i]};
      else expected = {rows[i], cols};
      if (t.shape != expected)
        throw_error("tensor '{}' has shape {}, expected {} for this config", part_names[i],
                    shape_str(t.shape), shape_str(expected));
      ref.parts.push_back(&t);
      total += rows[i];
    }
    ref.shape = cols == 0 ? std::vector<int64_t>{total} : std::vector<int64_t>{total, cols};
    return ref;
  }

  WeightRef vector(const std::string& name, int64_t n) const { return matrix({name}, {n}, 0, false); }
  WeightRef linear(const std::string& name, int64_t rows, int64_t cols) const {
    return matrix({name}, {rows}, cols, names_.linear_weights_transposed);
  }

 private:
  const Checkpoint& ckpt_;
  const TensorNames& names_;
};

// Row groups for a projection stored either fused (one name) or split (one name per group).
std::vector<int64_t> row_groups(size_t num_names, const std::vector<int64_t>& split) {
  if (num_names == split.size()) return split;
  int64_t total = 0;
  for (int64_t r : split) total += r;
  return {total};
}

std::vector<std::string> for_layer(const std::vector<std::string>& patterns, int layer) {
  std::vector<std::string> out;
  for (const auto& p : patterns) out.push_back(layer_name(p, layer));
  return out;
}

}  // namespace

int64_t WeightRef::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ModelWeightRefs resolve_weights(const Checkpoint& ckpt, const DecoderDesc& d,
                                const TensorNames& names) {
  const Resolver r(ckpt, names);
  const int64_t H = d.hidden_size, V = d.vocab_size, I = d.intermediate_size;
  const bool layer_norm = d.norm == NormKind::LayerNorm;
  ModelWeightRefs w;

  // Tied checkpoints may store either side of the tie (TinyStories keeps only lm_head).
  if (d.tie_word_embeddings && !r.lookup(names.embed) && r.lookup(names.lm_head))
    w.embed = r.matrix({names.lm_head}, {V}, H, false);
  else
    w.embed = r.matrix({names.embed}, {V}, H, false);
  if (d.positions == PositionKind::LearnedAbsolute)
    w.position_embed = r.matrix({names.position_embed}, {d.max_position_embeddings}, H, false);
  w.final_norm_weight = r.vector(names.final_norm_weight, H);
  if (layer_norm) w.final_norm_bias = r.vector(names.final_norm_bias, H);
  if (d.tie_word_embeddings && !r.lookup(names.lm_head)) {
    w.lm_head = w.embed;
    w.lm_head_tied = true;
  } else
    w.lm_head = r.matrix({names.lm_head}, {V}, H, false);

  const std::vector<int64_t> qkv_split = {d.q_size(), d.kv_size(), d.kv_size()};
  const int64_t up_rows = d.mlp == MlpKind::Gated ? 2 * I : I;
  const std::vector<int64_t> up_split =
      d.mlp == MlpKind::Gated ? std::vector<int64_t>{I, I} : std::vector<int64_t>{I};
  const bool transposed = names.linear_weights_transposed;

  for (int l = 0; l < d.num_layers; ++l) {
    LayerWeightRefs L;
    auto name = [&](const std::string& p) { return layer_name(p, l); };
    L.attn_norm_weight = r.vector(name(names.attn_norm_weight), H);
    L.mlp_norm_weight = r.vector(name(names.mlp_norm_weight), H);
    if (layer_norm) {
      L.attn_norm_bias = r.vector(name(names.attn_norm_bias), H);
      L.mlp_norm_bias = r.vector(name(names.mlp_norm_bias), H);
    }
    const auto qkv_names = for_layer(names.qkv_weight, l);
    L.qkv_weight = r.matrix(qkv_names, row_groups(qkv_names.size(), qkv_split), H, transposed);
    if (d.qkv_bias) {
      const auto bias_names = for_layer(names.qkv_bias, l);
      L.qkv_bias = r.matrix(bias_names, row_groups(bias_names.size(), qkv_split), 0, false);
    }
    L.o_weight = r.linear(name(names.o_weight), H, d.q_size());
    if (d.o_bias) L.o_bias = r.vector(name(names.o_bias), H);

    const auto up_names = for_layer(names.up_weight, l);
    L.up_weight = r.matrix(up_names, row_groups(up_names.size(), up_split), H, transposed);
    L.down_weight = r.linear(name(names.down_weight), H, I);
    if (d.mlp_bias) {
      const auto up_bias_names = for_layer(names.up_bias, l);
      L.up_bias = r.matrix(up_bias_names, row_groups(up_bias_names.size(), up_split), 0, false);
      L.down_bias = r.vector(name(names.down_bias), H);
    }
    if (L.up_weight.shape[0] != up_rows) throw_error("internal: MLP rows mismatch");
    w.layers.push_back(std::move(L));
  }
  return w;
}

ModelWeightRefs describe_weights(const DecoderDesc& d) {
  const int64_t H = d.hidden_size, V = d.vocab_size, I = d.intermediate_size;
  const bool layer_norm = d.norm == NormKind::LayerNorm;
  auto shaped = [](std::vector<int64_t> shape) {
    WeightRef r;
    r.shape = std::move(shape);
    return r;
  };
  ModelWeightRefs w;
  w.embed = shaped({V, H});
  if (d.positions == PositionKind::LearnedAbsolute) w.position_embed = shaped({d.max_position_embeddings, H});
  w.final_norm_weight = shaped({H});
  if (layer_norm) w.final_norm_bias = shaped({H});
  w.lm_head_tied = d.tie_word_embeddings;
  w.lm_head = shaped({V, H});
  for (int l = 0; l < d.num_layers; ++l) {
    LayerWeightRefs L;
    L.attn_norm_weight = L.mlp_norm_weight = shaped({H});
    if (layer_norm) L.attn_norm_bias = L.mlp_norm_bias = shaped({H});
    L.qkv_weight = shaped({d.qkv_size(), H});
    if (d.qkv_bias) L.qkv_bias = shaped({d.qkv_size()});
    L.o_weight = shaped({H, d.q_size()});
    if (d.o_bias) L.o_bias = shaped({H});
    const int64_t up_rows = d.mlp == MlpKind::Gated ? 2 * I : I;
    L.up_weight = shaped({up_rows, H});
    L.down_weight = shaped({H, I});
    if (d.mlp_bias) {
      L.up_bias = shaped({up_rows});
      L.down_bias = shaped({H});
    }
    w.layers.push_back(std::move(L));
  }
  return w;
}

void materialize_f32(const WeightRef& ref, float* dst) {
  const int64_t cols = ref.shape.size() == 2 ? ref.shape[1] : 1;
  int64_t row_offset = 0;
  std::vector<float> scratch;
  for (const TensorView* part : ref.parts) {
    const int64_t n = part->numel();
    const int64_t rows = n / cols;
    if (!ref.transposed) {
      convert_to_f32(part->dtype, part->data.data(), size_t(n), dst + row_offset * cols);
    } else {  // part stored [cols, rows]
      scratch.resize(size_t(n));
      convert_to_f32(part->dtype, part->data.data(), size_t(n), scratch.data());
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r)
          dst[(row_offset + r) * cols + c] = scratch[size_t(c * rows + r)];
    }
    row_offset += rows;
  }
}

std::vector<float> materialize_f32(const WeightRef& ref) {
  std::vector<float> out(size_t(ref.numel()));
  materialize_f32(ref, out.data());
  return out;
}

}  // namespace lmx
