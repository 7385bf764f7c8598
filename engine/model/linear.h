// A projection y[M, out] = x[M, in] · W^T + b as the model describes it: where its weight comes
// from, whether it has a bias, how tensor parallelism splits it and how it is quantized. Each
// backend turns a LinearRef into its own Linear (storage in its dtype and layout, same spec);
// the layer program calls projections only through those (docs/model-layer.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/checkpoint.h"

namespace lmx {

// One logical weight: the row-wise concatenation of checkpoint tensors, optionally with its rows
// reordered. Canonical layout is nn.Linear's [out, in] (or [n] for vectors); parts stored as
// [in, out] are `transposed`.
struct WeightRef {
  std::string name;  // first part's name, for messages
  std::vector<const TensorView*> parts;
  bool transposed = false;
  // Empty: rows as concatenated. Otherwise canonical row i is concatenated row row_order[i]
  // (fused q/k/v stored per head, GPT-J's interleaved rotary pairs).
  std::vector<int64_t> row_order;
  std::vector<int64_t> shape;  // canonical shape of the whole

  bool present() const { return !shape.empty(); }  // false: the model has no such weight
  bool empty() const { return !present(); }
  int64_t numel() const;
};

// How tensor parallelism splits a projection over ranks (docs/model-layer.md):
//   Column: output rows split; each rank computes its rows of y (q/k/v, gate/up).
//   Row: input columns split; each rank computes a partial y that an all-reduce sums (o, down).
//   Vocab: the LM head's rows split by vocabulary range (padded when it does not divide).
//   Replicated: every rank holds all of it (OPT's project_in / project_out).
enum class ShardKind { Replicated, Column, Row, Vocab };

struct ShardSpec {
  ShardKind kind = ShardKind::Replicated;
  // Column-parallel projections that fuse several matrices along their output rows (q | k | v,
  // gate | up) split each group on its own, in whole units (head_dim rows for q, k and v; one row
  // for gate and up), so a rank gets matching q heads, k/v heads, gate rows and up rows.
  std::vector<int64_t> groups;  // rows per group; one group when not fused
  int64_t unit = 1;
};

// Rank `rank` of `ranks`: the [begin, end) ranges of the canonical dimension the spec splits
// (output rows for Column and Vocab, input columns for Row; the whole for Replicated), in order.
// `extent` is that dimension's size. Throws lmx::Error naming the numbers when a group does not
// split into whole units (Vocab pads: the last ranks may get fewer rows, even none).
std::vector<std::pair<int64_t, int64_t>> shard_ranges(const ShardSpec& spec, int64_t extent,
                                                      int rank, int ranks);

enum class QuantKind { None };  // W8A16 / W8A8 arrive with the quantization issues

// A projection with its weight held in `Buffer`: a WeightRef (the model's description), host fp32
// (CPU backend) or device memory (CUDA backend). Same spec everywhere; backends map one into the
// other with map_weights (engine/model/model_weights.h).
template <typename Buffer>
struct Linear {
  Buffer weight;  // [out, in]
  Buffer bias;    // [out], empty when the projection has none
  int64_t out = 0, in = 0;
  ShardSpec shard;
  QuantKind quant = QuantKind::None;

  bool present() const { return out > 0; }
  bool has_bias() const { return !bias.empty(); }
};

// A norm's parameters: weight [n] and, for LayerNorm, bias [n] (empty for RMSNorm).
template <typename Buffer>
struct Norm {
  Buffer weight, bias;
};

using LinearRef = Linear<WeightRef>;
using NormRef = Norm<WeightRef>;

}  // namespace lmx
