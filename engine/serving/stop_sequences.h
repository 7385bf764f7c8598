// Text-level stop sequences for streaming: text is released only once it can no longer turn into
// a stop sequence, so a stop sequence is never emitted in part, and nothing after it at all.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lmx {

class StopSequenceMatcher {
 public:
  explicit StopSequenceMatcher(std::vector<std::string> stop_sequences);

  // Appends generated text (complete UTF-8); returns what may be emitted now. Once a stop
  // sequence appears, the text before it is returned and stopped() turns true.
  std::string push(std::string_view text);
  // End of generation without a stop: releases the held-back tail.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // held back: a suffix that is a prefix of some stop sequence
  bool stopped_ = false;
};

}  // namespace lmx
