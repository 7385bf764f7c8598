#include "engine/model/shard.h"

#include <algorithm>
#include <memory>

#include "engine/core/error.h"

namespace lmx {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

int64_t total(const Ranges& ranges) {
  int64_t n = 0;
  for (auto [b, e] : ranges) n += e - b;
  return n;
}

// Rows `ranges` of `ref` (through its own row order), then zero rows up to `rows` in all.
WeightRef select_rows(const WeightRef& ref, const Ranges& ranges, int64_t rows) {
  if (!ref.present()) return ref;
  WeightRef s = ref;
  s.row_order.clear();
  for (auto [b, e] : ranges)
    for (int64_t r = b; r < e; ++r)
      s.row_order.push_back(ref.row_order.empty() ? r : ref.row_order[size_t(r)]);
  s.row_order.resize(size_t(rows), WeightRef::kZeroRow);
  s.shape[0] = rows;
  return s;
}

WeightRef select_cols(const WeightRef& ref, const Ranges& ranges) {
  if (!ref.present()) return ref;
  if (!ref.col_ranges.empty()) throw_error("internal: '{}' is sliced twice", ref.name);
  WeightRef s = ref;
  s.col_ranges = ranges;
  s.shape[1] = total(ranges);
  return s;
}

LinearRef column_parallel(const LinearRef& l, TensorParallelRank tp) {
  const Ranges ranges = shard_ranges(l.shard, l.out, tp.rank, tp.ranks);
  LinearRef s = l;
  s.out = total(ranges);
  s.weight = select_rows(l.weight, ranges, s.out);
  s.bias = select_rows(l.bias, ranges, s.out);
  s.q.scale = select_rows(l.q.scale, ranges, s.out);
  return s;
}

// A block-scaled fp8 checkpoint's scale columns (one a `group` of input columns) for the input
// columns `ranges` of the weight `name`: whole groups only.
Ranges group_ranges(const Ranges& ranges, int64_t group, const std::string& name,
                    TensorParallelRank tp) {
  Ranges groups;
  for (auto [b, e] : ranges) {
    if (b % group != 0 || e % group != 0)
      throw_error(
          "'{}' is block-scaled fp8 (scales per {} input columns), and tensor-parallel "
          "rank {} of {} would hold its input columns [{}, {}) ({} columns), which are "
          "not whole groups of {}: choose a tensor_parallel_degree that splits them so",
          name, group, tp.rank, tp.ranks, b, e, total(ranges), group);
    groups.emplace_back(b / group, e / group);
  }
  return groups;
}

// The bias stays on rank 0 only: the all-reduce of the partial outputs adds it once. Per-row
// checkpoint scales cover the rank's columns as they do the whole row; block scales are sliced
// with the columns.
LinearRef row_parallel(const LinearRef& l, TensorParallelRank tp) {
  const Ranges ranges = shard_ranges(l.shard, l.in, tp.rank, tp.ranks);
  LinearRef s = l;
  s.in = total(ranges);
  s.weight = select_cols(l.weight, ranges);
  if (l.q.group > 0)
    s.q.scale = select_cols(l.q.scale, group_ranges(ranges, l.q.group, l.weight.name, tp));
  if (tp.rank != 0) s.bias = WeightRef{};
  return s;
}

// The LM head's vocabulary rows of the rank, zero rows past the vocabulary; `weight` is the
// head's own or the tied embedding.
LinearRef vocab_parallel(const LinearRef& head, const WeightRef& weight, TensorParallelRank tp) {
  const int64_t per = vocab_rows_per_rank(int(head.out), tp.ranks);
  const Ranges ranges = shard_ranges(head.shard, head.out, tp.rank, tp.ranks);
  LinearRef s = head;
  s.out = per;
  s.weight = select_rows(weight, ranges, per);
  s.bias = select_rows(head.bias, ranges, per);
  return s;
}

}  // namespace

int vocab_rows_per_rank(int vocab, int ranks) { return (vocab + ranks - 1) / ranks; }

VocabSlice rank_vocab_slice(int vocab, TensorParallelRank tp) {
  // The rows the LM head's split (vocab_parallel above) gives the rank.
  const auto [begin, end] = shard_ranges(ShardSpec::vocab(vocab), vocab, tp.rank, tp.ranks).front();
  return {int(begin), int(end - begin)};
}

DecoderDesc rank_desc(const DecoderDesc& d, TensorParallelRank tp) {
  const int n = tp.ranks;
  if (n < 1 || tp.rank < 0 || tp.rank >= n)
    throw_error("rank {} of {} is not a valid tensor-parallel rank", tp.rank, n);
  if (d.num_heads % n != 0)
    throw_error("{} attention heads do not split over tensor_parallel_degree {}", d.num_heads, n);
  if (d.num_kv_heads % n != 0 && n % d.num_kv_heads != 0)
    throw_error(
        "{} key/value heads do not split over tensor_parallel_degree {} (and {} is not a "
        "multiple of them to replicate them)",
        d.num_kv_heads, n, n);
  if (d.intermediate_size % n != 0)
    throw_error("intermediate size {} does not split over tensor_parallel_degree {}",
                d.intermediate_size, n);
  DecoderDesc r = d;
  r.num_heads = d.num_heads / n;
  r.num_kv_heads = std::max(1, d.num_kv_heads / n);
  r.intermediate_size = d.intermediate_size / n;
  return r;
}

// An fp8 checkpoint's projection (LinearRef::q.scale present): its scales for the rows (and,
// block-scaled, the columns' groups) the rank holds (resolve_weights checked them), read into
// quant.checkpoint_scales with their group (set again: option.quantize=fp8 replaced quant).
static void read_checkpoint_scales(LinearRef& l) {
  if (!l.q.scale.present()) return;
  l.quant.checkpoint_scales = std::make_shared<std::vector<float>>(materialize_f32(l.q.scale));
  l.quant.group = l.q.group;
}

ModelWeightRefs shard_weights(const ModelWeightRefs& w, const DecoderDesc& d,
                              TensorParallelRank tp) {
  rank_desc(d, tp);  // the degree's checks, with their messages
  ModelWeightRefs s = w;  // embedding, positions, norms and OPT's projections: whole
  if (tp.ranks > 1) {
    for (LayerWeightRefs& l : s.layers) {
      l.qkv = column_parallel(l.qkv, tp);
      l.o = row_parallel(l.o, tp);
      l.up = column_parallel(l.up, tp);
      l.down = row_parallel(l.down, tp);
    }
    s.lm_head = vocab_parallel(w.lm_head, w.lm_head_tied ? w.embed : w.lm_head.weight, tp);
    s.lm_head_tied = false;
  }
  for (LayerWeightRefs& l : s.layers)
    for (LinearRef* p : {&l.qkv, &l.o, &l.up, &l.down}) read_checkpoint_scales(*p);
  return s;
}

nlohmann::json shard_plan(const DecoderDesc& d, int degree) {
  const DecoderDesc r = rank_desc(d, {0, degree});
  const int vocab_rows = vocab_rows_per_rank(d.vocab_size, degree);
  const bool split = degree > 1;
  const char* column = split ? "column-parallel (output rows, whole heads)" : "whole";
  const char* row = split ? "row-parallel (input columns, all-reduce of the outputs)" : "whole";
  return {
      {"degree", degree},
      {"heads_per_rank", r.num_heads},
      {"kv_heads_per_rank", r.num_kv_heads},
      {"kv_heads_replicated", degree > d.num_kv_heads},
      {"intermediate_per_rank", r.intermediate_size},
      {"vocab_rows_per_rank", vocab_rows},
      {"vocab_padding_rows", int64_t(vocab_rows) * degree - d.vocab_size},
      {"projections",
       {{"qkv", column},
        {"o", row},
        {"up", split ? "column-parallel (output rows; gate and up split alike)" : "whole"},
        {"down", row},
        {"lm_head", split ? "vocab-parallel (vocabulary rows, padded; logits gathered)" : "whole"},
        {"embedding, norms, positions", "replicated"}}}};
}

}  // namespace lmx
