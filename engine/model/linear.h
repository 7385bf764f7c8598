// A projection y[M, out] = x[M, in] · W^T + b as the model describes it: where its weight comes
// from, whether it has a bias, how tensor parallelism splits it and how it is quantized. Each
// backend turns a LinearRef into its own Linear (storage in its dtype and layout, same spec);
// the layer program calls projections only through those (docs/model-layer.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/model/checkpoint.h"

namespace lmx {

// One logical weight: the row-wise concatenation of checkpoint tensors, optionally with its rows
// reordered or a tensor-parallel rank's slice selected. Canonical layout is nn.Linear's [out, in]
// (or [n] for vectors); parts stored as [in, out] are `transposed`. Materializing reads only the
// rows (and columns) selected, straight from the checkpoint's memory map.
struct WeightRef {
  std::string name;  // first part's name, for messages
  std::vector<const TensorView*> parts;
  bool transposed = false;
  // Empty: rows as concatenated. Otherwise row i is concatenated row row_order[i], or zeros where
  // that is kZeroRow (fused q/k/v stored per head, GPT-J's interleaved rotary pairs, a rank's rows
  // of a column-parallel weight, the padding of a vocabulary-parallel head).
  std::vector<int64_t> row_order;
  static constexpr int64_t kZeroRow = -1;
  // Empty: every column. Otherwise the [begin, end) ranges of stored columns kept, in order (a
  // rank's columns of a row-parallel weight).
  std::vector<std::pair<int64_t, int64_t>> col_ranges;
  std::vector<int64_t> shape;  // shape as materialized (after row_order and col_ranges)

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
  // Groups that may be replicated instead of split when they have fewer units than there are
  // ranks and the ranks are a multiple of them: k and v of GQA / MQA models at a degree above the
  // KV head count (rank r gets unit r / (ranks / units)). Empty: none.
  std::vector<bool> replicable;

  static ShardSpec replicated() { return {}; }
  static ShardSpec column(std::vector<int64_t> groups, int64_t unit = 1,
                          std::vector<bool> replicable = {}) {
    return {ShardKind::Column, std::move(groups), unit, std::move(replicable)};
  }
  static ShardSpec row(std::vector<int64_t> groups, int64_t unit = 1) {
    return {ShardKind::Row, std::move(groups), unit, {}};
  }
  static ShardSpec vocab(int64_t rows) { return {ShardKind::Vocab, {rows}, 1, {}}; }
};

// Rank `rank` of `ranks`: the [begin, end) ranges of the canonical dimension the spec splits
// (output rows for Column and Vocab, input columns for Row; the whole for Replicated), in order.
// `extent` is that dimension's size. Throws lmx::Error naming the numbers when a group does not
// split into whole units (Vocab pads: every rank gets ceil(extent / ranks) rows, the last ones
// fewer real ones, even none; `shard_rows` says how many a rank holds).
std::vector<std::pair<int64_t, int64_t>> shard_ranges(const ShardSpec& spec, int64_t extent,
                                                      int rank, int ranks);

// How a projection's weight is stored (option.quantize, docs/quantization.md):
//   None: in the backend's dtype.
//   W8A16PerChannel: int8 [out, in] + fp32 scales [out], one a row over the columns the Linear
//     holds (a rank's columns under row parallelism); activations stay in the compute dtype.
//   W8A16Grouped: int8 [out, in] + fp32 scales [out, in / group], one a row per `group` input
//     columns (whole groups per rank: `group` divides every rank's columns).
//   W8A8 (option.quantize=smoothquant): int8 [out, in] + fp32 scales [out] of the smoothed weight
//     W diag(s), activations quantized per token to int8 (quant/w8a8.h). The input's 1/s is
//     folded into the norm that produces it (`smooth_in_norm`) or applied to the activations.
//   Fp8 (option.quantize=fp8): E4M3 codes [out, in] (in QuantStorage::values, as bytes) + fp32
//     scales [out], activations quantized per token to E4M3 (quant/fp8.h). A block-scaled fp8
//     checkpoint (weight_block_size [128, 128]) sets `group` = 128: scales [out, in / 128], its
//     128 x 128 blocks' scales repeated on each of a block's rows (whole groups per rank).
// The description (LinearRef) says what is wanted; a backend that holds it quantizes the weight
// after materializing it (quant/int8.h, quant/fp8.h) and its linear dispatches on the kind.
enum class QuantKind { None, W8A16PerChannel, W8A16Grouped, W8A8, Fp8 };

struct LinearQuant {
  QuantKind kind = QuantKind::None;
  // W8A16Grouped, and Fp8 from a block-scaled checkpoint: input columns per scale; 0 otherwise
  // (Fp8: one scale a row).
  int64_t group = 0;
  // SmoothQuant's factors s [in] for this projection's input (null: not smoothed), shared by the
  // projections that read the same input: the weight becomes W diag(s) (W8A8 quantizes that; with
  // kind None it stays fp32, which is exact and how the folding is tested); smooth_in_norm: the
  // preceding norm's weight and bias are divided by s, else the activations are multiplied by 1/s.
  std::shared_ptr<const std::vector<float>> smooth = nullptr;
  bool smooth_in_norm = false;
  // Fp8 from an fp8 checkpoint (engine/model/quantization.h, CheckpointFp8): the weight's scales,
  // [rows the Linear holds, in / group_for(in)] (a rank's rows and, row-parallel and
  // block-scaled, its columns' groups), set by shard_weights from the description's q.scale:
  // one a row, or a block-scaled checkpoint's block scales, row o's those of its block row.
  // The weight then holds the checkpoint's E4M3 values (unscaled), which the backend stores as
  // codes with these scales. Null: the backend quantizes the weight itself (one scale a row).
  std::shared_ptr<const std::vector<float>> checkpoint_scales = nullptr;

  bool quantized() const { return kind != QuantKind::None; }
  // The option.quantize method that asks for this kind, for messages.
  const char* method() const {
    return kind == QuantKind::W8A8 ? "smoothquant" : kind == QuantKind::Fp8 ? "fp8" : "dynamic_int8";
  }
  // Whether the kind quantizes the activations too (W8A8, fp8): the decoder's projections only,
  // the LM head and OPT's project_in / project_out stay unquantized.
  bool quantizes_activations() const { return kind == QuantKind::W8A8 || kind == QuantKind::Fp8; }
  // Input columns one scale covers in a Linear of `in` columns.
  int64_t group_for(int64_t in) const {
    return kind == QuantKind::W8A16Grouped || (kind == QuantKind::Fp8 && group > 0) ? group : in;
  }
};

// Where a backend keeps a quantized weight, by its Buffer type: empty (the backend cannot hold
// one: map_weights refuses quantized Linears for it) unless specialized below.
template <typename Buffer>
struct QuantStorage {};

// Host memory (the CPU backend): the weight's int8 values and fp32 scales; Linear::weight is
// then empty.
template <>
struct QuantStorage<std::vector<float>> {
  std::vector<int8_t> values;  // [out, in] (Fp8: E4M3 codes as bytes)
  std::vector<float> scales;   // [out, in / group] (W8A8: [out])
  std::vector<float> inv_smooth;  // W8A8 with smoothing not folded into a norm: 1 / s [in]
};

// The description: an fp8 checkpoint's weight scales, [out, in / group] in the weight's canonical
// row order (each stored row's scales: its tensor's one scale, its channel's, or its 128-row
// block's row of a block-scaled checkpoint's `weight_scale_inv`), or absent.
template <>
struct QuantStorage<WeightRef> {
  WeightRef scale;
  int64_t group = 0;  // input columns per scale (block-scaled: 128); 0: one scale a row
};

// Where a backend keeps what folding a LayerNorm into a projection leaves beside its weight (the
// row sums its decode kernels center the input with: kernels/gemm.h, InputNorm): empty unless
// specialized (the CUDA backend's, engine/backend/cuda/device_weights.h).
template <typename Buffer>
struct NormFoldStorage {};

// Whether a Linear<Buffer> can carry a quantized weight: the description (a request) and the
// buffers with a QuantStorage.
template <typename Buffer>
inline constexpr bool kHoldsQuantized = !std::is_empty_v<QuantStorage<Buffer>>;

// A projection with its weight held in `Buffer`: a WeightRef (the model's description), host fp32
// (CPU backend) or device memory (CUDA backend). Same spec everywhere; backends map one into the
// other with map_weights (engine/model/model_weights.h).
template <typename Buffer>
struct Linear {
  Buffer weight;  // [out, in]; empty once quantized into `q`
  Buffer bias;    // [out], empty when the projection has none
  int64_t out = 0, in = 0;
  ShardSpec shard;
  LinearQuant quant;
  [[no_unique_address]] QuantStorage<Buffer> q;  // the quantized weight, when quant.quantized()
  [[no_unique_address]] NormFoldStorage<Buffer> norm_fold;  // a LayerNorm folded into it

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
