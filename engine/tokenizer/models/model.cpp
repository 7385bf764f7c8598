#include "engine/tokenizer/models/model.h"

#include "engine/core/error.h"
#include "engine/tokenizer/models/bpe.h"
#include "engine/tokenizer/models/unigram.h"
#include "engine/tokenizer/models/wordpiece.h"

namespace lmx::tok {

void Vocab::add(std::string token, int32_t id) {
  if (id < 0) throw_error("tokenizer: negative id {} for token '{}'", id, token);
  const auto i = static_cast<size_t>(id);
  if (i >= tokens_.size()) {
    tokens_.resize(i + 1);
    has_.resize(i + 1, false);
  }
  tokens_[i] = token;
  has_[i] = true;
  map_[std::move(token)] = id;
}

std::unique_ptr<Model> make_model(const nlohmann::json& j) {
  std::string type = j.value("type", "");
  // Old files omit the type; infer it from the fields that only one model has.
  if (type.empty()) {
    if (j.contains("merges"))
      type = "BPE";
    else if (j.contains("max_input_chars_per_word"))
      type = "WordPiece";
    else if (j.contains("unk_id"))
      type = "Unigram";
  }
  if (type == "BPE") return make_bpe(j);
  if (type == "WordPiece") return make_wordpiece(j);
  if (type == "Unigram") return make_unigram(j);
  throw_error("tokenizer: unsupported model type '{}'",
              type.empty() ? j.dump().substr(0, 80) : type);
}

}  // namespace lmx::tok
