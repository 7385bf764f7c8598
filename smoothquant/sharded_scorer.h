// The alpha search over a model split across tensor-parallel ranks (smoothquant's sharded
// calibration): one SmoothingScorer a rank, each holding its rank's slices. SmoothQuant smooths
// only the inputs of column-parallel projections (qkv, gate/up), which every rank holds whole
// with a slice of the output rows, so the whole model's answers combine exactly from the ranks':
//   weight_column_max: max over the ranks (each a max over its own rows);
//   w8a8_error: the error and reference sums added over the ranks (each a sum over its rows; the
//     activations' per-token quantization reads the whole input, the same on every rank).
// Where a degree replicates KV heads (degree a multiple of the KV head count), those K / V rows
// count once for every rank that holds them. The row-parallel projections (o, down: each rank holds
// a slice of the input columns) do not combine this way and are refused.
#pragma once

#include <span>
#include <vector>

#include "engine/backend/smoothing_scorer.h"

namespace lmx::smoothquant {

class ShardedScorer final : public SmoothingScorer {
 public:
  // The ranks' scorers in rank order (not owned; they must outlive this). Throws lmx::Error if
  // there are none or one is null.
  explicit ShardedScorer(std::vector<SmoothingScorer*> ranks);
  std::vector<float> weight_column_max(int layer, LinearSlot slot) override;
  void set_rows(std::span<const float> x, int rows, int in) override;
  ErrorSums w8a8_error(int layer, LinearSlot slot, std::span<const float> s) override;

 private:
  std::vector<SmoothingScorer*> ranks_;
};

}  // namespace lmx::smoothquant
