// Byte-pair encoding (tokenizers' BPE model): merges by rank, byte_fallback, ignore_merges,
// unk_token/fuse_unk, continuing_subword_prefix and end_of_word_suffix. Words already seen are
// served from a bounded cache shared by all threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/models/model.h"

namespace lmx::tok {

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

std::unique_ptr<Model> make_bpe(const nlohmann::json& j);
std::unique_ptr<Model> make_bpe(Vocab vocab,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                BpeOptions options);

}  // namespace lmx::tok
