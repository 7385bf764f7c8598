// A tokenization model (BPE, WordPiece, Unigram): turns one pre-tokenized word into ids and owns
// the vocabulary.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace lmx::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// token <-> id in both directions; ids may be sparse.
class Vocab {
 public:
  void add(std::string token, int32_t id);
  std::optional<int32_t> find(std::string_view token) const {
    auto it = map_.find(token);
    return it == map_.end() ? std::nullopt : std::optional<int32_t>(it->second);
  }
  const std::string* token(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < tokens_.size() && has_[static_cast<size_t>(id)]
               ? &tokens_[static_cast<size_t>(id)]
               : nullptr;
  }
  int32_t size() const { return static_cast<int32_t>(map_.size()); }

 private:
  TokenMap map_;
  std::vector<std::string> tokens_;
  std::vector<bool> has_;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized word.
  virtual void tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
  virtual const Vocab& vocab() const = 0;
};

// Throws lmx::Error naming the type for an unsupported model.
std::unique_ptr<Model> make_model(const nlohmann::json& j);

}  // namespace lmx::tok
