// Incremental detokenization, the same algorithm as tokenizers' DecodeStream: decode a small
// window (the last emitted token as context + the pending ones) and emit what it adds beyond the
// context's own text, unless that ends in U+FFFD (a character still missing bytes).
#include "engine/tokenizer/tokenizer.h"

namespace lmx {
namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  std::string text = tokenizer_.decode(ids_, skip_special_);
  if (text.size() <= prefix_.size() || ends_with_replacement(text)) return {};
  // The window's text normally extends the context's; if a decoder rewrote it, emit the tail.
  size_t common = 0;
  while (common < prefix_.size() && text[common] == prefix_[common]) ++common;
  std::string out = text.substr(common);
  // Keep only the tokens after the old context as the new context.
  const size_t new_prefix_index = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  prefix_ = tokenizer_.decode(ids_, skip_special_);
  prefix_index_ = new_prefix_index;
  return out;
}

std::string StreamDecoder::finish() {
  std::string text = tokenizer_.decode(ids_, skip_special_);
  std::string out = text.size() > prefix_.size() ? text.substr(prefix_.size()) : std::string();
  ids_.clear();
  prefix_.clear();
  prefix_index_ = 0;
  return out;
}

}  // namespace lmx
