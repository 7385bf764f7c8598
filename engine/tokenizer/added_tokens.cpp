#include "engine/tokenizer/added_tokens.h"

#include <algorithm>

#include "engine/tokenizer/normalizers.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/json_ids.h"

namespace lmx::tok {

AddedToken parse_added_token(const nlohmann::json& j) {
  AddedToken t;
  t.id = tok::token_id(j.at("id"), "an added token's id");
  t.content = j.at("content").get<std::string>();
  t.special = j.value("special", false);
  t.lstrip = j.value("lstrip", false);
  t.rstrip = j.value("rstrip", false);
  t.normalized = j.value("normalized", !t.special);
  t.single_word = j.value("single_word", false);
  return t;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized_set,
                                     const Normalizer* normalizer) {
  for (const AddedToken& t : tokens) {
    if (t.normalized != normalized_set || t.content.empty()) continue;
    std::string text = t.content;
    if (normalized_set && normalizer) normalizer->normalize(text);
    if (text.empty()) continue;
    by_first_byte_[static_cast<unsigned char>(text[0])].push_back(patterns_.size());
    patterns_.push_back({std::move(text), &t});
  }
}

namespace {

// Whitespace test on the code point that ends just before `pos` / starts at `pos`.
bool ws_before(std::string_view s, size_t pos) {
  size_t b = pos;
  while (b > 0 && (static_cast<unsigned char>(s[b - 1]) & 0xC0) == 0x80) --b;
  if (b > 0) --b;
  size_t i = b;
  return is_whitespace(next_codepoint(s, i));
}
bool ws_at(std::string_view s, size_t pos) { return is_whitespace(next_codepoint(s, pos)); }

}  // namespace

void AddedTokenMatcher::split(std::string_view s, std::vector<Part>& out) const {
  size_t start_offset = 0;  // end of the last emitted token
  size_t pos = 0;           // where the search resumes
  while (pos < s.size()) {
    // Leftmost-longest match.
    size_t best = patterns_.size();
    size_t at = pos;
    for (; at < s.size(); ++at) {
      for (size_t k : by_first_byte_[static_cast<unsigned char>(s[at])]) {
        const std::string& p = patterns_[k].text;
        if (s.compare(at, p.size(), p) == 0 &&
            (best == patterns_.size() || p.size() > patterns_[best].text.size()))
          best = k;
      }
      if (best != patterns_.size()) break;
    }
    if (best == patterns_.size()) break;
    const AddedToken& tok = *patterns_[best].token;
    size_t start = at, stop = at + patterns_[best].text.size();
    pos = stop;
    if (tok.single_word) {
      const bool start_ok = start == 0 || ws_before(s, start);
      const bool stop_ok = stop == s.size() || ws_at(s, stop);
      if (!start_ok || !stop_ok) continue;
    }
    if (tok.lstrip) {
      size_t b = start;
      while (b > 0 && ws_before(s, b)) {
        --b;
        while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
      }
      start = std::max(b, start_offset);
    }
    if (tok.rstrip) {
      while (stop < s.size()) {
        size_t i = stop;
        if (!is_whitespace(next_codepoint(s, i))) break;
        stop = i;
      }
      pos = stop;
    }
    if (start > start_offset) out.push_back({s.substr(start_offset, start - start_offset), -1});
    out.push_back({s.substr(start, stop - start), tok.id});
    start_offset = stop;
  }
  if (start_offset < s.size()) out.push_back({s.substr(start_offset), -1});
}

}  // namespace lmx::tok
