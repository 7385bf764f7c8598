#include "engine/serving/stop_sequences.h"

#include <algorithm>

namespace lmx {

StopSequenceMatcher::StopSequenceMatcher(std::vector<std::string> stop_sequences) {
  for (auto& s : stop_sequences)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopSequenceMatcher::push(std::string_view text) {
  if (stopped_) return {};
  pending_ += text;
  size_t first = std::string::npos;
  for (const auto& stop : stops_) first = std::min(first, pending_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix of pending_ that starts some stop sequence.
  size_t hold = 0;
  for (const auto& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len)
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopSequenceMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return stopped_ ? std::string() : out;
}

}  // namespace lmx
