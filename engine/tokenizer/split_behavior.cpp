#include "engine/tokenizer/split_behavior.h"

#include <algorithm>

#include "engine/core/error.h"

namespace lmx::tok {

SplitBehavior parse_split_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw_error("tokenizer: unsupported split behavior '{}'", name);
}

void split_piece(std::string_view piece, const std::vector<std::pair<size_t, size_t>>& matches,
                 SplitBehavior behavior, bool invert, std::vector<std::string>& out) {
  struct Region {
    size_t b, e;
    bool delim;
  };
  std::vector<Region> regions;
  size_t last = 0;
  for (const auto& [b, e] : matches) {
    if (b > last) regions.push_back({last, b, invert});
    regions.push_back({b, e, !invert});
    last = e;
  }
  if (last < piece.size()) regions.push_back({last, piece.size(), invert});

  std::vector<std::pair<size_t, size_t>> parts;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& r : regions)
        if (!r.delim) parts.emplace_back(r.b, r.e);
      break;
    case SplitBehavior::kIsolated:
      for (const auto& r : regions) parts.emplace_back(r.b, r.e);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool prev_delim = false;
      for (const auto& r : regions) {
        if (r.delim && !prev_delim && !parts.empty())
          parts.back().second = r.e;
        else
          parts.emplace_back(r.b, r.e);
        prev_delim = r.delim;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool next_delim = false;
      for (auto it = regions.rbegin(); it != regions.rend(); ++it) {
        if (it->delim && !next_delim && !parts.empty())
          parts.back().first = it->b;
        else
          parts.emplace_back(it->b, it->e);
        next_delim = it->delim;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool prev_delim = false;
      for (const auto& r : regions) {
        if (r.delim == prev_delim && !parts.empty())
          parts.back().second = r.e;
        else
          parts.emplace_back(r.b, r.e);
        prev_delim = r.delim;
      }
      break;
    }
  }
  for (const auto& [b, e] : parts)
    if (e > b) out.emplace_back(piece.substr(b, e - b));
}

}  // namespace lmx::tok
