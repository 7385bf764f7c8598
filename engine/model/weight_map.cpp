#include "engine/model/weight_map.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/load_deadline.h"
#include "engine/model/mapped_file.h"

namespace lmx {
namespace {

std::string layer_name(const std::string& pattern, int layer) {
  return fmt::format(fmt::runtime(pattern), layer);
}

std::vector<std::string> for_layer(const std::vector<std::string>& patterns, int layer) {
  std::vector<std::string> out;
  for (const auto& p : patterns) out.push_back(layer_name(p, layer));
  return out;
}

// Row groups for a projection stored either fused (one name) or split (one name per group).
std::vector<int64_t> row_groups(size_t num_names, const std::vector<int64_t>& split) {
  if (num_names == split.size()) return split;
  return {std::accumulate(split.begin(), split.end(), int64_t(0))};
}

// Looks tensors up in a checkpoint and checks them; without a checkpoint (describe_weights) it
// only shapes the references.
class Resolver {
 public:
  // fp8: the checkpoint's projections may be stored as E4M3 codes with scales (CheckpointFp8).
  // fp8_block: a block-scaled checkpoint's block side (128), 0 otherwise.
  Resolver(const Checkpoint* ckpt, const TensorNames& names, bool fp8, int64_t fp8_block)
      : ckpt_(ckpt), names_(names), fp8_(fp8), fp8_block_(fp8_block) {}

  bool has(const std::string& name) const { return lookup(name) != nullptr; }

  // `rows` splits the canonical rows among the parts (one entry per part); `cols` == 0 for vectors.
  WeightRef matrix(const std::vector<std::string>& part_names, const std::vector<int64_t>& rows,
                   int64_t cols, bool transposed, bool allow_fp8 = false) const {
    WeightRef ref;
    const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t(0));
    ref.shape = cols == 0 ? std::vector<int64_t>{total} : std::vector<int64_t>{total, cols};
    if (!ckpt_) return ref;
    if (part_names.size() != rows.size())
      throw_error("internal: {} parts for {} row groups", part_names.size(), rows.size());
    ref.name = part_names.front();
    ref.transposed = transposed && cols > 0;
    for (size_t i = 0; i < part_names.size(); ++i) {
      const TensorView& t = require(part_names[i], allow_fp8);
      std::vector<int64_t> expected;
      if (cols == 0)
        expected = {rows[i]};
      else if (ref.transposed)
        expected = {cols, rows[i]};
      else
        expected = {rows[i], cols};
      if (t.shape != expected)
        throw_error("tensor '{}' has shape {}, expected {} for this config", part_names[i],
                    shape_str(t.shape), shape_str(expected));
      ref.parts.push_back(&t);
    }
    return ref;
  }

  WeightRef vector(const std::string& name, int64_t n) const {
    return matrix({name}, {n}, 0, false);
  }

  NormRef norm(const std::string& weight, const std::string& bias, int64_t n, bool has_bias) const {
    NormRef r;
    r.weight = vector(weight, n);
    if (has_bias) r.bias = vector(bias, n);
    return r;
  }

  // A projection [sum(split), cols] stored as one tensor or one per group of `split`.
  LinearRef linear(const std::vector<std::string>& weight_names,
                   const std::vector<std::string>& bias_names, const std::vector<int64_t>& split,
                   int64_t cols, bool has_bias, ShardSpec shard,
                   bool transposed_storage = true) const {
    LinearRef l;
    l.weight = matrix(weight_names, row_groups(weight_names.size(), split), cols,
                      transposed_storage && names_.linear_weights_transposed, fp8_);
    if (has_bias) l.bias = matrix(bias_names, row_groups(bias_names.size(), split), 0, false);
    l.out = l.weight.shape[0];
    l.in = cols;
    l.shard = std::move(shard);
    return l;
  }

  // An fp8 checkpoint's projection: when its weight parts are E4M3 codes, marks it Fp8 and
  // resolves each part's scales into l.q.scale [out, in / group], in the weight's canonical row
  // order (set it first): `<part>_scale` ([] or [1] per tensor, [rows] or [rows, 1] per output
  // channel; one column), or for a block-scaled checkpoint (fp8_block_ > 0, group = fp8_block_)
  // `<part>_scale_inv` [ceil(rows / block), in / block], each row its block row's scales. Only
  // the decoder's projections may be fp8.
  void fp8_scales(LinearRef& l, const std::vector<std::string>& weight_names,
                  bool decoder_projection) const {
    const auto is_fp8 = [](const TensorView* t) { return t->dtype == DType::F8_E4M3; };
    const size_t fp8_parts = size_t(std::count_if(l.weight.parts.begin(), l.weight.parts.end(), is_fp8));
    if (fp8_parts == 0) return;
    if (!decoder_projection)
      throw_error("tensor '{}' is stored in fp8 (F8_E4M3): LMX loads fp8 weights for the decoder's "
                  "q/k/v, o, gate/up and down projections only, and keeps this one in 16-bit",
                  l.weight.name);
    if (l.weight.transposed)
      throw_error("tensor '{}' is stored in fp8 transposed ([in, out], as GPT-2's Conv1D): fp8 "
                  "weights load in nn.Linear's [out, in] layout only",
                  l.weight.name);
    if (fp8_parts != l.weight.parts.size())
      throw_error("tensor '{}' is one of a fused projection's parts, some of which are fp8 and some "
                  "not: they must be stored alike",
                  l.weight.name);
    const int64_t block = fp8_block_;
    if (block > 0 && l.in % block != 0)
      throw_error(
          "tensor '{}' is a block-scaled fp8 weight of {} input columns, not a multiple of "
          "its block size {}: a partial last block of columns is not supported",
          l.weight.name, l.in, block);
    const int64_t cols = block > 0 ? l.in / block : 1;  // scales a row
    const char* suffix = block > 0 ? "_scale_inv" : "_scale";
    WeightRef& s = l.q.scale;
    s.name = weight_names.front() + suffix;
    s.shape = {l.out, cols};
    // Each part's first stored weight row, its first row in the concatenated scales, and the
    // weight rows one scale row covers (0: all of the part's).
    std::vector<int64_t> stored_start, scale_start, rows_per_scale;
    int64_t rows = 0, scale_rows = 0;
    for (size_t i = 0; i < weight_names.size(); ++i) {
      const std::string name = weight_names[i] + suffix;
      const TensorView& t = require(name, false);
      const int64_t part_rows = l.weight.parts[i]->shape[0];
      if (block > 0) {
        const std::vector<int64_t> blocks = {(part_rows + block - 1) / block, cols};
        if (t.shape != blocks)
          throw_error(
              "tensor '{}' has shape {}: the block scales of '{}' [{}, {}] in {} x {} "
              "blocks are [{}, {}]",
              name, shape_str(t.shape), weight_names[i], part_rows, l.in, block, block, blocks[0],
              blocks[1]);
        rows_per_scale.push_back(block);
      } else {
        const bool channel = t.shape == std::vector<int64_t>{part_rows} ||
                             t.shape == std::vector<int64_t>{part_rows, 1};
        const bool tensor = t.numel() == 1 && t.shape.size() <= 1;
        if (!tensor && !channel)
          throw_error(
              "tensor '{}' has shape {}: an fp8 weight scale is [] or [1] (per tensor) or "
              "[{}] / [{}, 1] (per output channel of '{}')",
              name, shape_str(t.shape), part_rows, part_rows, weight_names[i]);
        rows_per_scale.push_back(channel ? 1 : 0);
      }
      s.parts.push_back(&t);
      stored_start.push_back(rows);
      scale_start.push_back(scale_rows);
      rows += part_rows;
      scale_rows += t.numel() / cols;
    }
    // Canonical row -> stored weight row -> its scales' row.
    for (int64_t i = 0; i < l.out; ++i) {
      const int64_t stored = l.weight.row_order.empty() ? i : l.weight.row_order[size_t(i)];
      if (stored == WeightRef::kZeroRow) {
        s.row_order.push_back(WeightRef::kZeroRow);
        continue;
      }
      const size_t p = size_t(std::upper_bound(stored_start.begin(), stored_start.end(), stored) -
                              stored_start.begin() - 1);
      const int64_t per = rows_per_scale[p];
      s.row_order.push_back(scale_start[p] + (per == 0 ? 0 : (stored - stored_start[p]) / per));
    }
    // A few floats, checked here so that load_model refuses a bad one; shard_weights reads them
    // again, each rank its rows, into quant.checkpoint_scales (kept here they would be lost:
    // request_quantization replaces l.quant for option.quantize=fp8 on an fp8 checkpoint).
    for (const TensorView* part : s.parts) {
      WeightRef whole;
      whole.parts = {part};
      whole.shape = {part->numel() / cols, cols};
      const std::vector<float> v = materialize_f32(whole);
      for (size_t i = 0; i < v.size(); ++i)
        if (!(v[i] > 0.0f))
          throw_error("tensor '{}' holds the weight scale {} (element {}): fp8 scales must be "
                      "positive",
                      part->name, v[i], i);
    }
    l.q.group = block;
    l.quant = LinearQuant{QuantKind::Fp8, block};
  }

 private:
  const TensorView* lookup(const std::string& name) const {
    if (!ckpt_) return nullptr;
    if (const TensorView* t = ckpt_->find(name)) return t;
    const std::string& prefix = names_.optional_prefix;
    if (!prefix.empty() && name.starts_with(prefix)) return ckpt_->find(name.substr(prefix.size()));
    return nullptr;
  }

  const TensorView& require(const std::string& name, bool allow_fp8) const {
    const TensorView* t = lookup(name);
    if (!t) throw_error("missing tensor '{}' in the checkpoint at {}", name, ckpt_->dir().string());
    if (allow_fp8 && t->dtype == DType::F8_E4M3) return *t;
    if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16)
      throw_error("tensor '{}' has dtype {}, expected F32, F16 or BF16{}", name,
                  dtype_name(t->dtype),
                  t->dtype == DType::F8_E4M3
                      ? " (fp8 weights load from checkpoints whose config.json declares them: "
                        "compressed-tensors, AutoFP8 or block-scaled fp8 quantization_config)"
                      : "");
    return *t;
  }

  const Checkpoint* ckpt_;
  const TensorNames& names_;
  bool fp8_;
  int64_t fp8_block_;
};

// Canonical q | k | v row -> stored row of the fused projection. PerHead storage interleaves the
// three per head ([heads, 3, head_dim]); interleaved rotary (GPT-J) pairs dims (2i, 2i + 1) where
// the kernels pair (i, i + r/2), so q and k rows of the rotary dims are reordered to match.
std::vector<int64_t> qkv_row_order(const DecoderDesc& d, QkvLayout layout) {
  const bool per_head = layout == QkvLayout::PerHead;
  const bool interleaved = d.positions == PositionKind::Rotary && d.rope.interleaved;
  if (!per_head && !interleaved) return {};
  if (per_head && d.num_heads != d.num_kv_heads)
    throw_error("internal: per-head fused q/k/v needs as many kv heads as heads");
  const int64_t D = d.head_dim, r = d.rope.rotary_dim;
  // Dim of the stored head that canonical dim `i` of a rotated head comes from.
  const auto source_dim = [&](int64_t i) {
    if (!interleaved || i >= r) return i;
    return i < r / 2 ? 2 * i : 2 * (i - r / 2) + 1;
  };
  std::vector<int64_t> order;
  order.reserve(size_t(d.qkv_size()));
  const int64_t heads[3] = {d.num_heads, d.num_kv_heads, d.num_kv_heads};
  int64_t group_start = 0;  // concatenated layout: first row of q, k, v
  for (int g = 0; g < 3; ++g) {
    for (int64_t h = 0; h < heads[g]; ++h)
      for (int64_t i = 0; i < D; ++i) {
        const int64_t dim = g < 2 ? source_dim(i) : i;  // v is not rotated
        order.push_back(per_head ? (h * 3 + g) * D + dim : group_start + h * D + dim);
      }
    group_start += heads[g] * D;
  }
  return order;
}

ModelWeightRefs build_refs(const Checkpoint* ckpt, const DecoderDesc& d, const TensorNames& names,
                           bool fp8, int64_t fp8_block) {
  const Resolver r(ckpt, names, fp8, fp8_block);
  const int64_t H = d.hidden_size, E = d.embed_dim, V = d.vocab_size, I = d.intermediate_size;
  const int64_t D = d.head_dim, Q = d.q_size(), KV = d.kv_size();
  const bool layer_norm = d.norm == NormKind::LayerNorm;
  ModelWeightRefs w;

  // Tied checkpoints may store either side of the tie (TinyStories keeps only lm_head).
  const bool embed_from_head = d.tie_word_embeddings && !r.has(names.embed) && r.has(names.lm_head);
  w.embed = r.matrix({embed_from_head ? names.lm_head : names.embed}, {V}, E, false);
  if (d.positions == PositionKind::LearnedAbsolute)
    w.position_embed =
        r.matrix({names.position_embed}, {d.max_position_embeddings + d.position_offset}, H, false);
  if (d.embedding_norm)
    w.embed_norm = r.norm(names.embed_norm_weight, names.embed_norm_bias, H, layer_norm);
  const ShardSpec replicated = ShardSpec::replicated();
  if (d.projects_embeddings()) {
    w.project_in = r.linear({names.project_in}, {}, {H}, E, false, replicated, false);
    w.project_out = r.linear({names.project_out}, {}, {E}, H, false, replicated, false);
  }
  if (d.final_norm)
    w.final_norm = r.norm(names.final_norm_weight, names.final_norm_bias, H, layer_norm);
  // Tied when one tensor serves both; a checkpoint that stores both keeps them apart (transformers
  // does not tie them either when they differ).
  w.lm_head_tied = d.tie_word_embeddings && (!r.has(names.lm_head) || !r.has(names.embed));
  const ShardSpec vocab = ShardSpec::vocab(V);
  if (w.lm_head_tied) {  // the embedding serves as the weight; only its shape and bias here
    w.lm_head.out = V;
    w.lm_head.in = E;
    w.lm_head.shard = vocab;
    if (d.lm_head_bias) w.lm_head.bias = r.vector(names.lm_head_bias, V);
  } else {
    w.lm_head =
        r.linear({names.lm_head}, {names.lm_head_bias}, {V}, E, d.lm_head_bias, vocab, false);
  }

  const std::vector<int64_t> qkv_split = {Q, KV, KV};
  const std::vector<int64_t> up_split =
      d.mlp == MlpKind::Gated ? std::vector<int64_t>{I, I} : std::vector<int64_t>{I};
  const std::vector<int64_t> qkv_order = qkv_row_order(d, names.qkv_layout);
  for (int l = 0; l < d.num_layers; ++l) {
    LayerWeightRefs L;
    auto name = [&](const std::string& p) { return layer_name(p, l); };
    L.attn_norm = r.norm(name(names.attn_norm_weight), name(names.attn_norm_bias), H, layer_norm);
    if (d.has_mlp_norm())
      L.mlp_norm = r.norm(name(names.mlp_norm_weight), name(names.mlp_norm_bias), H, layer_norm);
    L.qkv = r.linear(for_layer(names.qkv_weight, l), for_layer(names.qkv_bias, l), qkv_split, H,
                     d.qkv_bias, ShardSpec::column(qkv_split, D, {false, true, true}));
    if (ckpt) {
      L.qkv.weight.row_order = qkv_order;
      if (L.qkv.has_bias()) L.qkv.bias.row_order = qkv_order;
    }
    L.o = r.linear({name(names.o_weight)}, {name(names.o_bias)}, {H}, Q, d.o_bias,
                   ShardSpec::row({Q}, D));
    L.up = r.linear(for_layer(names.up_weight, l), for_layer(names.up_bias, l), up_split, H,
                    d.mlp_bias, ShardSpec::column(up_split));
    L.down = r.linear({name(names.down_weight)}, {name(names.down_bias)}, {H}, I, d.mlp_bias,
                      ShardSpec::row({I}));
    if (ckpt && fp8) {
      r.fp8_scales(L.qkv, for_layer(names.qkv_weight, l), true);
      r.fp8_scales(L.o, {name(names.o_weight)}, true);
      r.fp8_scales(L.up, for_layer(names.up_weight, l), true);
      r.fp8_scales(L.down, {name(names.down_weight)}, true);
      const QuantKind first = w.layers.empty() ? L.qkv.quant.kind : w.layers[0].qkv.quant.kind;
      for (const LinearRef* p : {&L.qkv, &L.o, &L.up, &L.down})
        if (p->quant.kind != first)
          throw_error("layer {}: tensor '{}' is {}stored in fp8 where layer 0's q/k/v projection "
                      "is {}: LMX needs every decoder projection of an fp8 checkpoint in fp8",
                      l, p->weight.name, p->quant.kind == QuantKind::Fp8 ? "" : "not ",
                      first == QuantKind::Fp8 ? "fp8" : "not");
    }
    w.layers.push_back(std::move(L));
  }
  if (ckpt && fp8) {
    if (!w.lm_head_tied) r.fp8_scales(w.lm_head, {names.lm_head}, false);
    if (d.projects_embeddings()) {
      r.fp8_scales(w.project_in, {names.project_in}, false);
      r.fp8_scales(w.project_out, {names.project_out}, false);
    }
  }
  return w;
}

}  // namespace

int64_t WeightRef::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ModelWeightRefs resolve_weights(const Checkpoint& ckpt, const DecoderDesc& d,
                                const TensorNames& names, bool fp8_checkpoint, int64_t fp8_block) {
  return build_refs(&ckpt, d, names, fp8_checkpoint, fp8_block);
}

ModelWeightRefs describe_weights(const DecoderDesc& d) {
  return build_refs(nullptr, d, {}, false, 0);
}

namespace {

// Weights are checked as they are converted (every backend materializes through here): a NaN
// or infinity would load as healthy and answer garbage.
void require_finite(const TensorView& part, const float* values, int64_t n, int64_t row) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i]))
      throw_error("{}: tensor '{}' holds a non-finite weight ({}){}",
                  part.file ? part.file->string() : "checkpoint", part.name, values[i],
                  row >= 0 ? fmt::format(" in row {}", row) : "");
}

// The checkpoint pages materialize_f32 read (stored rows [first, last] of each part, or the whole
// part when transposed), released from the process's memory (engine/model/mapped_file.h).
void release_read_pages(const WeightRef& ref, std::span<const std::pair<int64_t, int64_t>> read_rows,
                        int64_t full_cols) {
  for (size_t p = 0; p < ref.parts.size(); ++p) {
    const auto [first, last] = read_rows[p];
    if (last < first) continue;
    const std::span<const std::byte> data = ref.parts[p]->data;
    if (ref.transposed) {
      release_mapped_pages(data);
      continue;
    }
    const size_t row_bytes = size_t(full_cols) * dtype_size(ref.parts[p]->dtype);
    release_mapped_pages(data.subspan(size_t(first) * row_bytes, size_t(last - first + 1) * row_bytes));
  }
}

// Where a weight's rows are stored: the concatenation of its parts (their first rows in it), the
// stored row length and the column ranges kept.
struct StoredRows {
  std::vector<int64_t> part_start;
  int64_t full_cols = 0;
  std::vector<std::pair<int64_t, int64_t>> col_ranges;

  explicit StoredRows(const WeightRef& ref) : col_ranges(ref.col_ranges) {
    int64_t total_rows = 0;
    for (const TensorView* part : ref.parts) {
      part_start.push_back(total_rows);
      const int64_t part_cols = part->shape.size() == 2 ? part->shape[ref.transposed ? 0 : 1] : 1;
      full_cols = part_cols;
      total_rows += part->numel() / part_cols;
    }
    if (col_ranges.empty()) col_ranges = {{0, full_cols}};
  }
  // The part holding concatenated row `stored`, and the row within it.
  std::pair<size_t, int64_t> locate(int64_t stored) const {
    const size_t p = size_t(std::upper_bound(part_start.begin(), part_start.end(), stored) -
                            part_start.begin() - 1);
    return {p, stored - part_start[p]};
  }
};

// Rows [begin, end) of `ref` in order: zero_row(i) for a padding row, stored_row(i, part p, row r
// of the part) for the others; then the checkpoint pages of the rows read are released.
template <typename ZeroRow, typename StoredRow>
void walk_rows(const WeightRef& ref, const StoredRows& rows, int64_t begin, int64_t end,
               ZeroRow zero_row, StoredRow stored_row) {
  // Each part's stored rows read, [first, last].
  std::vector<std::pair<int64_t, int64_t>> read_rows(ref.parts.size(), {INT64_MAX, -1});
  for (int64_t i = begin; i < end; ++i) {
    const int64_t stored = ref.row_order.empty() ? i : ref.row_order[size_t(i)];
    if (stored == WeightRef::kZeroRow) {
      zero_row(i);
      continue;
    }
    const auto [p, r] = rows.locate(stored);
    read_rows[p] = {std::min(read_rows[p].first, r), std::max(read_rows[p].second, r)};
    stored_row(i, p, r);
  }
  release_read_pages(ref, read_rows, rows.full_cols);
}

// Whether any of n stored values (F16, BF16 or F32 bits) is an infinity or a NaN.
bool any_non_finite(DType dtype, const std::byte* data, size_t n) {
  const auto all_ones = [&](auto bits, auto exponent) {
    for (size_t i = 0; i < n; ++i) {
      decltype(bits) v;
      std::memcpy(&v, data + i * sizeof v, sizeof v);
      if ((v & exponent) == exponent) return true;
    }
    return false;
  };
  if (dtype == DType::F32) return all_ones(uint32_t{}, uint32_t{0x7F800000u});
  return all_ones(uint16_t{}, uint16_t(dtype == DType::F16 ? 0x7C00u : 0x7F80u));
}

}  // namespace

void materialize_rows_f32(const WeightRef& ref, int64_t begin, int64_t end, float* dst) {
  check_load_deadline();  // option.model_loading_timeout: an abandoned load stops at a tensor
  const int64_t cols = ref.shape.size() == 2 ? ref.shape[1] : 1;
  const StoredRows stored_rows(ref);
  // Transposed parts (GPT-2's Conv1D, [cols, rows]) are converted whole, one part at a time.
  std::vector<float> transposed_part;
  size_t transposed_index = SIZE_MAX;
  auto row_out = [&](int64_t i) { return dst + (i - begin) * cols; };
  walk_rows(
      ref, stored_rows, begin, end, [&](int64_t i) { std::fill_n(row_out(i), cols, 0.0f); },
      [&](int64_t i, size_t p, int64_t r) {
        const TensorView& part = *ref.parts[p];
        float* out = row_out(i);
        if (!ref.transposed) {
          const size_t elem = dtype_size(part.dtype);
          for (auto [b, e] : stored_rows.col_ranges) {
            convert_to_f32(part.dtype,
                           part.data.data() + size_t(r * stored_rows.full_cols + b) * elem,
                           size_t(e - b), out);
            require_finite(part, out, e - b, r);
            out += e - b;
          }
          return;
        }
        const int64_t part_rows = part.shape[1];
        if (transposed_index != p) {
          transposed_part.resize(size_t(part.numel()));
          convert_to_f32(part.dtype, part.data.data(), size_t(part.numel()),
                         transposed_part.data());
          require_finite(part, transposed_part.data(), part.numel(), -1);
          transposed_index = p;
        }
        for (auto [b, e] : stored_rows.col_ranges)
          for (int64_t c = b; c < e; ++c) *out++ = transposed_part[size_t(c * part_rows + r)];
      });
}

bool copy_rows_as_stored(const WeightRef& ref, DType dtype, int64_t begin, int64_t end,
                         std::byte* dst) {
  if (dtype != DType::F16 && dtype != DType::BF16 && dtype != DType::F32) return false;
  if (ref.transposed) return false;
  for (const TensorView* part : ref.parts)
    if (part->dtype != dtype) return false;
  check_load_deadline();
  const size_t elem = dtype_size(dtype);
  const int64_t cols = ref.shape.size() == 2 ? ref.shape[1] : 1;
  const StoredRows stored_rows(ref);
  auto row_out = [&](int64_t i) { return dst + size_t(i - begin) * size_t(cols) * elem; };
  walk_rows(
      ref, stored_rows, begin, end,
      [&](int64_t i) { std::memset(row_out(i), 0, size_t(cols) * elem); },
      [&](int64_t i, size_t p, int64_t r) {
        const TensorView& part = *ref.parts[p];
        std::byte* out = row_out(i);
        for (auto [b, e] : stored_rows.col_ranges) {
          const size_t bytes = size_t(e - b) * elem;
          std::memcpy(out, part.data.data() + size_t(r * stored_rows.full_cols + b) * elem, bytes);
          if (any_non_finite(dtype, out, size_t(e - b))) {  // the message of the converting path
            std::vector<float> values(size_t(e - b));
            convert_to_f32(dtype, out, values.size(), values.data());
            require_finite(part, values.data(), e - b, r);
          }
          out += bytes;
        }
      });
  return true;
}

void materialize_f32(const WeightRef& ref, float* dst) {
  materialize_rows_f32(ref, 0, ref.shape[0], dst);
}

std::vector<float> materialize_f32(const WeightRef& ref) {
  std::vector<float> out(size_t(ref.numel()));
  materialize_f32(ref, out.data());
  return out;
}

}  // namespace lmx
