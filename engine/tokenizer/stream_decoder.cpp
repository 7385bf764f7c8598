// Incremental detokenization, the same algorithm as tokenizers' DecodeStream: decode a small
// window (the last emitted token as context + the pending ones) and emit what it adds beyond the
// context's own text, unless that ends in U+FFFD (a character still missing bytes). One addition:
// a run of byte-fallback tokens (<0xNN>) is held until it ends, because the ByteFallback decoder
// judges a run's UTF-8 as a whole: <0x48> alone decodes to "H", but <0x48><0xE7> to two U+FFFD,
// so emitting "H" early broke concat(push) == decode(all) (found by the tokenizer_text fuzzer).
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_impl.h"

namespace lmx {
namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

// "<0xNN>": a byte-fallback token of SentencePiece-style vocabularies.
bool is_byte_token(const std::string& t) { return tok::byte_fallback_value(t) >= 0; }

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  // Hold while a byte-fallback run may still grow: after a byte token, and after a token that
  // decode() leaves out (an id outside the vocabulary, a skipped special token), since the bytes
  // on either side of it still form one run.
  const std::string token = tokenizer_.id_to_token(id);
  if (is_byte_token(token) || token.empty() || (skip_special_ && tokenizer_.is_special(id)))
    return {};
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
