// Unigram (SentencePiece's unigram LM): Viterbi over the lattice of vocabulary pieces, unknown
// characters scored min_score - 10 and fused, optional byte_fallback.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/models/model.h"

namespace lmx::tok {

std::unique_ptr<Model> make_unigram(const nlohmann::json& j);

}  // namespace lmx::tok
