#include "smoothquant/sharded_scorer.h"

#include <algorithm>

#include "engine/core/error.h"

namespace lmx::smoothquant {
namespace {

void check_column_parallel(int layer, LinearSlot slot) {
  if (slot != LinearSlot::Qkv && slot != LinearSlot::Up)
    throw_error(
        "alpha search over tensor-parallel ranks: layer {}'s {} projection is row-parallel "
        "(each rank holds a slice of its inputs); only qkv and gate/up inputs are smoothed",
        layer, slot == LinearSlot::O ? "o" : "down");
}

}  // namespace

ShardedScorer::ShardedScorer(std::vector<SmoothingScorer*> ranks) : ranks_(std::move(ranks)) {
  if (ranks_.empty()) throw_error("internal: a sharded alpha search needs at least one rank");
  for (size_t r = 0; r < ranks_.size(); ++r)
    if (!ranks_[r]) throw_error("internal: tensor-parallel rank {} has no alpha search", r);
}

std::vector<float> ShardedScorer::weight_column_max(int layer, LinearSlot slot) {
  check_column_parallel(layer, slot);
  std::vector<float> m = ranks_[0]->weight_column_max(layer, slot);
  for (size_t r = 1; r < ranks_.size(); ++r) {
    const std::vector<float> mr = ranks_[r]->weight_column_max(layer, slot);
    if (mr.size() != m.size())
      throw_error("internal: rank {} holds {} input columns of layer {}'s projection, rank 0 {}", r,
                  mr.size(), layer, m.size());
    for (size_t j = 0; j < m.size(); ++j) m[j] = std::max(m[j], mr[j]);
  }
  return m;
}

void ShardedScorer::set_rows(std::span<const float> x, int rows, int in) {
  for (SmoothingScorer* r : ranks_) r->set_rows(x, rows, in);
}

ErrorSums ShardedScorer::w8a8_error(int layer, LinearSlot slot, std::span<const float> s) {
  check_column_parallel(layer, slot);
  ErrorSums sum;
  for (SmoothingScorer* r : ranks_) {
    const ErrorSums e = r->w8a8_error(layer, slot, s);
    sum.error += e.error;
    sum.reference += e.reference;
  }
  return sum;
}

}  // namespace lmx::smoothquant
