// The loaded state behind lmx::Tokenizer (internal to engine/tokenizer).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/decoders.h"
#include "engine/tokenizer/models/model.h"
#include "engine/tokenizer/normalizers.h"
#include "engine/tokenizer/post_processors.h"
#include "engine/tokenizer/pre_tokenizers.h"
#include "engine/tokenizer/tokenizer.h"

namespace lmx {

struct Tokenizer::Impl {
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::Model> model;
  std::unique_ptr<tok::PostProcessor> post_processor;
  std::unique_ptr<tok::Decoder> decoder;
  std::vector<tok::AddedToken> added;
  std::unordered_map<int32_t, size_t> added_by_id;  // id -> index in `added`
  tok::TokenMap added_by_content;
  tok::AddedTokenMatcher raw_matcher, normalized_matcher;
  std::optional<int32_t> bos, eos, pad;
  std::string chat_template;

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;
};

namespace tok {
// The byte of a "<0xNN>" byte-fallback token; -1 for any other token.
int byte_fallback_value(const std::string& token);
}  // namespace tok

// Builds the state from parsed tokenizer.json and tokenizer_config.json (null when absent).
std::shared_ptr<const Tokenizer::Impl> build_tokenizer(const nlohmann::json& tokenizer,
                                                       const nlohmann::json& config);

}  // namespace lmx
