// tokenizer.json's added_tokens: tokens matched in the text before the model runs (special
// tokens such as <|begin_of_text|>, or user-added words), with tokenizers' lstrip, rstrip,
// single_word and normalized rules. Tokens with normalized=false are matched in the raw text,
// the others in the normalized text (their patterns normalized the same way).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lmx::tok {

class Normalizer;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, normalized = false, single_word = false;
  // What decode() emits for it: tokenizers gives a normalized token's *normalized* content
  // (e.g. "\u2581<unk>" after a Prepend normalizer), and only skips it as special when that
  // text is itself a special token's content.
  std::string decoded;
  bool skip_as_special = false;
};

AddedToken parse_added_token(const nlohmann::json& j);

class AddedTokenMatcher {
 public:
  // A span of text, or a matched token (id >= 0).
  struct Part {
    std::string_view text;
    int32_t id = -1;
  };

  AddedTokenMatcher() = default;
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized_set,
                    const Normalizer* normalizer);
  bool empty() const { return patterns_.empty(); }
  // Splits `text` into parts (views into `text`); empty text spans are dropped.
  void split(std::string_view text, std::vector<Part>& out) const;

 private:
  struct Pat {
    std::string text;
    const AddedToken* token;
  };
  std::vector<Pat> patterns_;
  std::vector<std::vector<size_t>> by_first_byte_ = std::vector<std::vector<size_t>>(256);
};

}  // namespace lmx::tok
