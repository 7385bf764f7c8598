#include "engine/model/linear.h"

#include <algorithm>
#include <numeric>

#include "engine/core/error.h"

namespace lmx {

std::vector<std::pair<int64_t, int64_t>> shard_ranges(const ShardSpec& spec, int64_t extent,
                                                      int rank, int ranks) {
  if (ranks <= 0 || rank < 0 || rank >= ranks)
    throw_error("rank {} of {} ranks is not a valid tensor-parallel rank", rank, ranks);
  if (spec.kind == ShardKind::Replicated || ranks == 1) return {{0, extent}};
  if (spec.kind == ShardKind::Vocab) {  // padded: ceil(extent / ranks) rows a rank
    const int64_t per = (extent + ranks - 1) / ranks;
    const int64_t begin = std::min(extent, per * rank);
    return {{begin, std::min(extent, begin + per)}};
  }
  const std::vector<int64_t> groups = spec.groups.empty() ? std::vector<int64_t>{extent} : spec.groups;
  if (std::accumulate(groups.begin(), groups.end(), int64_t(0)) != extent)
    throw_error("internal: shard groups do not add up to {}", extent);
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t start = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t rows = groups[g], units = rows / spec.unit;
    const bool replicate = g < spec.replicable.size() && spec.replicable[g] && units < ranks &&
                           units > 0 && ranks % units == 0;
    if (rows % spec.unit != 0 || (!replicate && units % ranks != 0))
      throw_error("{} rows ({} units of {}) do not split evenly over {} tensor-parallel ranks",
                  rows, units, spec.unit, ranks);
    if (replicate) {
      const int64_t unit = rank / (ranks / units);
      out.emplace_back(start + unit * spec.unit, start + (unit + 1) * spec.unit);
    } else {
      const int64_t per = rows / ranks;
      out.emplace_back(start + per * rank, start + per * (rank + 1));
    }
    start += rows;
  }
  return out;
}

}  // namespace lmx
