#include "engine/tokenizer/models/wordpiece.h"

#include "engine/core/error.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/json_ids.h"

namespace lmx::tok {
namespace {

class WordPiece final : public Model {
 public:
  WordPiece(Vocab vocab, const std::string& unk, std::string prefix, size_t max_chars)
      : vocab_(std::move(vocab)), prefix_(std::move(prefix)), max_chars_(max_chars) {
    auto id = vocab_.find(unk);
    if (!id) throw_error("tokenizer: WordPiece unk_token '{}' is not in the vocab", unk);
    unk_id_ = *id;
  }

  const Vocab& vocab() const override { return vocab_; }

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    if (word.empty()) return;
    if (count_codepoints(word) > max_chars_) {
      out.push_back(unk_id_);
      return;
    }
    const size_t mark = out.size();
    std::string candidate;
    for (size_t start = 0; start < word.size();) {
      size_t end = word.size();
      std::optional<int32_t> found;
      while (end > start) {
        candidate.clear();
        if (start > 0) candidate += prefix_;
        candidate.append(word.substr(start, end - start));
        if ((found = vocab_.find(candidate))) break;
        do --end;  // back up one code point
        while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
      }
      if (!found) {
        out.resize(mark);
        out.push_back(unk_id_);
        return;
      }
      out.push_back(*found);
      start = end;
    }
  }

 private:
  Vocab vocab_;
  std::string prefix_;
  size_t max_chars_;
  int32_t unk_id_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_wordpiece(const nlohmann::json& j) {
  Vocab vocab;
  for (const auto& [piece, id] : j.at("vocab").items())
    vocab.add(piece, tok::token_id(id, "a vocabulary id"));
  return std::make_unique<WordPiece>(std::move(vocab), j.value("unk_token", std::string("[UNK]")),
                                     j.value("continuing_subword_prefix", std::string("##")),
                                     j.value("max_input_chars_per_word", size_t{100}));
}

}  // namespace lmx::tok
