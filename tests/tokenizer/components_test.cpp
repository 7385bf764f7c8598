// Loading, metadata and error behaviour of lmx::Tokenizer.
#include <gtest/gtest.h>

#include <thread>

#include "engine/core/error.h"
#include "tests/tokenizer/test_support.h"

namespace lmx::test {
namespace {

std::string minimal_json(const std::string& extra) {
  return R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "a": 1}})" +
         extra + "}";
}

void expect_error_mentions(const std::string& json, const std::string& needle) {
  try {
    (void)Tokenizer::from_json(json, "");
    ADD_FAILURE() << "no error for " << json;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TokenizerLoad, UnsupportedComponentsNameThemselves) {
  expect_error_mentions(minimal_json(R"(, "normalizer": {"type": "Precompiled"})"), "Precompiled");
  expect_error_mentions(minimal_json(R"(, "pre_tokenizer": {"type": "UnicodeScripts"})"),
                        "UnicodeScripts");
  expect_error_mentions(minimal_json(R"(, "decoder": {"type": "CTC"})"), "CTC");
  expect_error_mentions(minimal_json(R"(, "post_processor": {"type": "Fancy"})"), "Fancy");
  expect_error_mentions(R"({"model": {"type": "WordLevel", "vocab": {}}})", "WordLevel");
  expect_error_mentions("{not json", "not valid JSON");
  expect_error_mentions(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})",
                        "merge");
}

TEST(TokenizerLoad, MissingDirectoryFilesSayWhat) {
  try {
    (void)Tokenizer::from_model_dir("/nonexistent/model");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
}

TEST(TokenizerLoad, SharedModelMetadata) {
  const Tokenizer tok =
      Tokenizer::from_model_dir(std::filesystem::path(LMX_SHARED_MODELS_DIR) / "tinystories-656k");
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.vocab_size(), 2048);
  EXPECT_TRUE(tok.is_special(1));
  EXPECT_FALSE(tok.is_special(100));
  EXPECT_EQ(tok.token_to_id("<|end_story|>"), 2);
  EXPECT_EQ(tok.id_to_token(2), "<|end_story|>");
  EXPECT_EQ(tok.encode("Once upon a time").front(), 1);
}

TEST(TokenizerLoad, RealTokenizerMetadata) {
  const Tokenizer llama3 = load_named_tokenizer("llama3");
  EXPECT_EQ(llama3.bos_id(), 128000);
  EXPECT_EQ(llama3.eos_id(), 128001);
  EXPECT_EQ(llama3.vocab_size(), 128256);
  EXPECT_FALSE(llama3.chat_template().empty());
  const Tokenizer qwen3 = load_named_tokenizer("qwen3");
  EXPECT_FALSE(qwen3.bos_id().has_value());
  EXPECT_EQ(qwen3.eos_id(), qwen3.token_to_id("<|im_end|>"));
  const Tokenizer gpt2 = load_named_tokenizer("gpt2");
  EXPECT_EQ(gpt2.eos_id(), 50256);
  EXPECT_EQ(gpt2.vocab_size(), 50257);
}

TEST(TokenizerThreads, ConcurrentEncodeMatchesSerial) {
  const Tokenizer tok = load_named_tokenizer("llama3");
  const std::string text = "The quick brown fox jumps over the lazy dog, again and again: 12345!";
  const auto expected = tok.encode(text);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        if (tok.encode(text + std::to_string(i % 7)).size() < expected.size()) ++bad;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(TokenizerEncode, InvalidUtf8IsRepairedNotFatal) {
  const Tokenizer tok = load_named_tokenizer("llama3");
  const std::string bad =
      "ab\xff\xfe"
      "cd";
  EXPECT_EQ(tok.encode(bad, false), tok.encode("ab\xEF\xBF\xBD\xEF\xBF\xBD"
                                               "cd",
                                               false));
}

}  // namespace
}  // namespace lmx::test

namespace lmx::test {
namespace {

// Long inputs: megabyte whitespace runs (regex lookahead backtracking needs a big JIT stack) and
// a long SentencePiece input that is one BPE "word".
TEST(TokenizerEncode, LongInputs) {
  const Tokenizer llama3 = load_named_tokenizer("llama3");
  const std::string spaces(1 << 20, ' ');
  const auto ids = llama3.encode(spaces + "x", false);
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(llama3.decode(ids), spaces + "x");
  const Tokenizer llama2 = load_named_tokenizer("llama2");
  std::string prose;
  for (int i = 0; i < 2000; ++i) prose += "The quick brown fox jumps over the lazy dog. ";
  const auto ids2 = llama2.encode(prose, false);
  EXPECT_LT(ids2.size(), prose.size() / 3);
  EXPECT_EQ(llama2.decode(ids2), prose);
}

}  // namespace
}  // namespace lmx::test

namespace lmx::test {
namespace {

TEST(TokenizerLoad, ConfigAddBosEosRebuildsTemplate) {
  const std::string tj = R"({
    "added_tokens": [{"id": 0, "content": "<s>", "special": true},
                     {"id": 1, "content": "</s>", "special": true}],
    "pre_tokenizer": {"type": "WhitespaceSplit"},
    "model": {"type": "WordPiece", "unk_token": "[UNK]",
              "vocab": {"<s>": 0, "</s>": 1, "[UNK]": 2, "a": 3}}})";
  const Tokenizer tok = Tokenizer::from_json(
      tj, R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": true,
              "add_eos_token": true, "chat_template": "{{ messages }}"})");
  EXPECT_EQ(tok.encode("a a"), (std::vector<int32_t>{0, 3, 3, 1}));
  EXPECT_EQ(tok.encode("a b", false), (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{0, 3, 1}, true), "a");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{0, 3, 1}, false), "<s> a </s>");
  EXPECT_EQ(tok.chat_template(), "{{ messages }}");
  EXPECT_EQ(tok.eos_id(), 1);
}

TEST(TokenizerLoad, ConfigTokenMissingFromVocabIsAnError) {
  const std::string tj = R"({"model": {"type": "WordPiece", "unk_token": "[UNK]",
                                       "vocab": {"[UNK]": 0}}})";
  EXPECT_THROW((void)Tokenizer::from_json(tj, R"({"eos_token": "</s>"})"), Error);
}

// A tokenizer.json of the wrong shape is an lmx::Error in the user's terms, not the JSON
// library's "[json.exception.type_error.302]".
TEST(TokenizerLoad, WrongShapeSaysSoInUserTerms) {
  for (const char* tj : {R"([])", R"({"model": [1, 2, 3]})",
                         R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})",
                         R"({"model": {"type": "BPE", "vocab": {"a": 5.5e21}, "merges": []}})",
                         R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})",
                         R"({"model": {"type": "WordPiece", "vocab": {"a": 1.5}}})"}) {
    try {
      (void)Tokenizer::from_json(tj, "");
      ADD_FAILURE() << "loaded " << tj;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("tokenizer"), std::string::npos) << what;
      EXPECT_EQ(what.find("json.exception"), std::string::npos) << what;
    }
  }
  EXPECT_THROW((void)Tokenizer::from_json(R"({"model": {"type": "WordPiece", "vocab": {}}})", "[1]"),
               Error);
}

}  // namespace
}  // namespace lmx::test
