// Streaming detokenization: complete UTF-8 only, leading-space rule, equality with decode().
#include <gtest/gtest.h>

#include "tests/tokenizer/test_support.h"

namespace lmx::test {
namespace {

bool complete_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    i += n;
  }
  return true;
}

TEST(StreamDecoder, ByteFallbackCharacterAppearsOnceWhole) {
  const Tokenizer tok = load_named_tokenizer("llama2");
  const std::string text = "Hi 👍🏽 there 𝕳";
  const auto ids = tok.encode(text, false);
  StreamDecoder stream(tok, false);
  std::string all;
  int empty_pushes = 0;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_TRUE(complete_utf8(piece)) << ::testing::PrintToString(piece);
    empty_pushes += piece.empty();
    all += piece;
  }
  all += stream.finish();
  EXPECT_GT(empty_pushes, 0);  // the 4-byte characters arrive as several byte tokens
  EXPECT_EQ(all, tok.decode(ids));
  EXPECT_EQ(all, text);
}

TEST(StreamDecoder, SentencePieceLeadingSpaceKeptBetweenTokens) {
  const Tokenizer tok = load_named_tokenizer("llama2");
  const auto ids = tok.encode("Hello world again", true);
  StreamDecoder stream(tok, true);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(stream.push(id));
  std::string all;
  for (const auto& p : pieces) all += p;
  EXPECT_EQ(all + stream.finish(), "Hello world again");
  EXPECT_EQ(pieces.back(), " again");
}

TEST(StreamDecoder, ByteLevelSplitCharacters) {
  for (const char* name : {"llama3", "qwen3", "gpt2"}) {
    const Tokenizer tok = load_named_tokenizer(name);
    const std::string text = "中文分词 👨‍👩‍👧‍👦 naïve";
    const auto ids = tok.encode(text, false);
    StreamDecoder stream(tok, false);
    std::string all;
    for (int32_t id : ids) {
      const std::string piece = stream.push(id);
      EXPECT_TRUE(complete_utf8(piece)) << name;
      all += piece;
    }
    EXPECT_EQ(all + stream.finish(), text) << name;
  }
}

}  // namespace
}  // namespace lmx::test
