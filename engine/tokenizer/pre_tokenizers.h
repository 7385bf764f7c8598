// Pre-tokenizers of tokenizer.json: ByteLevel, Split, Metaspace, Digits, Punctuation, Whitespace,
// WhitespaceSplit, BertPreTokenizer and Sequence. Each one refines a list of pieces (the words
// the model tokenizes separately); offsets are not tracked.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lmx::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // `at_start`: pieces[0] begins at offset 0 of the original input (Metaspace "first" scheme).
  virtual void split(std::vector<std::string>& pieces, bool at_start) const = 0;
};

// nullptr for JSON null; throws lmx::Error naming the type for an unsupported one.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j);

}  // namespace lmx::tok
