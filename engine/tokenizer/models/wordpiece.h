// WordPiece (BERT): greedy longest-match-first with a continuing-subword prefix ("##"); a word
// that cannot be covered, or is longer than max_input_chars_per_word, becomes unk_token.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/models/model.h"

namespace lmx::tok {

std::unique_ptr<Model> make_wordpiece(const nlohmann::json& j);

}  // namespace lmx::tok
