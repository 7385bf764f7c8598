// Tokenizer::token_bytes: what a token adds to the text, as bytes (the constrained decoder's
// vocabulary trie, engine/generate/token_trie.h).
#include "engine/tokenizer/tokenizer_impl.h"
#include "engine/tokenizer/unicode.h"

namespace lmx {

int tok::byte_fallback_value(const std::string& t) {
  const auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::optional<std::string> Tokenizer::token_bytes(int32_t id) const {
  const Impl& m = *impl_;
  if (auto it = m.added_by_id.find(id); it != m.added_by_id.end()) {
    const tok::AddedToken& a = m.added[it->second];
    if (a.special) return std::nullopt;
    return a.decoded;
  }
  const std::string* t = m.model->vocab().token(id);
  if (t == nullptr) return std::nullopt;
  if (!m.decoder) return *t;
  if (const int b = tok::byte_fallback_value(*t); b >= 0) return std::string(1, char(b));
  // A byte-level decoder maps "\u0120" (GPT-2's space) to " ": map the token's code points back
  // to bytes one by one (decoding would replace a partial UTF-8 character by U+FFFD).
  std::vector<std::string> space{"\u0120"};
  m.decoder->decode_chain(space);
  if (space.size() == 1 && space[0] == " ") {
    std::string bytes;
    for (size_t i = 0; i < t->size();) {
      const int b = tok::unicode_to_byte(tok::next_codepoint(*t, i));
      if (b < 0) return *t;  // outside the byte alphabet: the decoder passes it through
      bytes += char(b);
    }
    return bytes;
  }
  // Otherwise the decoder chain's text for (probe, token) beyond the probe's own: the token's
  // text in the middle of a sequence (a SentencePiece "\u2581" is a space there).
  std::vector<std::string> alone{"a"}, both{"a", *t};
  m.decoder->decode_chain(alone);
  m.decoder->decode_chain(both);
  std::string a, ab;
  for (const auto& s : alone) a += s;
  for (const auto& s : both) ab += s;
  if (ab.compare(0, a.size(), a) != 0) return *t;
  return ab.substr(a.size());
}

}  // namespace lmx
