// How a split keeps its delimiters (tokenizers' SplitDelimiterBehavior), applied to a piece cut
// into alternating delimiter / non-delimiter regions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmx::tok {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

SplitBehavior parse_split_behavior(const std::string& name);

// Appends to `out` the parts of `piece` given the delimiter matches ([begin, end), sorted,
// non-overlapping). With `invert`, the matches are what is kept and the gaps are delimiters.
void split_piece(std::string_view piece, const std::vector<std::pair<size_t, size_t>>& matches,
                 SplitBehavior behavior, bool invert, std::vector<std::string>& out);

}  // namespace lmx::tok
