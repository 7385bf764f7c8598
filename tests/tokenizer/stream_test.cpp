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

// A run of byte-fallback tokens is judged as a whole by the decoder: an ASCII byte token followed
// by a stray continuation byte decodes to replacement characters, not "H" + one (the fuzzer's
// finding on stories260k: <0x48><0xE7>).
TEST(StreamDecoder, ByteFallbackRunIsDecodedAsAWhole) {
  const Tokenizer tok = Tokenizer::from_model_dir(std::string(LMX_SHARED_MODELS_DIR) + "/stories260k");
  for (const std::vector<int32_t>& ids : std::vector<std::vector<int32_t>>{
           {475, 75, 234}, {475, 75, 234, 476}, {75, 234}, {234, 75}, {75}, {424, 120, 493},
           {42, 75, 513, 152, 185}, {75, 2, 234, 476}, {75, 1, 2, 234}}) {
    for (bool skip_special : {false, true}) {  // 513: outside the vocabulary; 1, 2: <s>, </s>
      StreamDecoder stream(tok, skip_special);
      std::string all;
      for (int32_t id : ids) all += stream.push(id);
      all += stream.finish();
      EXPECT_EQ(all, tok.decode(ids, skip_special)) << ::testing::PrintToString(ids) << skip_special;
    }
  }
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

namespace lmx::test {
namespace {

// Random strings over a pool of tricky code points: byte-level and byte-fallback tokenizers are
// lossless (no normalizer changes these; qwen3 NFC would fold a decomposed é, left out), so
// decode(encode(s)) == s, and the stream must reproduce decode() exactly.
TEST(StreamDecoder, RandomRoundTrips) {
  const char* pool[] = {" ", "  ", "\t",  "\n",       "\r\n",         "a",
                        "Z", "7",  "'s",  "é",        "中",           "日",
                        "ש", "م",  "😀",   "👍🏽", "\xE2\x80\x8D", "<",
                        "|", ">",  "<s>", "\xC2\xA0", "\xEF\xBF\xBD", ".",
                        ",", "!",  "the", "ing",      "🦙"};
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>(state >> 33);
  };
  for (const char* name : {"llama3", "qwen3", "gpt2", "llama2"}) {
    const Tokenizer tok = load_named_tokenizer(name);
    for (int iter = 0; iter < 150; ++iter) {
      std::string s;
      const size_t n = 1 + next() % 24;
      for (size_t k = 0; k < n; ++k) s += pool[next() % (sizeof pool / sizeof *pool)];
      const auto ids = tok.encode(s, false);
      const std::string decoded = tok.decode(ids, false);
      // llama2's <s> is a special token: the text after it gets its own prepended "▁".
      if (std::string(name) != "llama2" || s.find("<s>") == std::string::npos) {
        EXPECT_EQ(decoded, s) << name << " " << ::testing::PrintToString(s);
      }
      EXPECT_EQ(stream_decode(tok, ids, false), decoded)
          << name << " " << ::testing::PrintToString(s);
      EXPECT_EQ(stream_decode(tok, ids, true), tok.decode(ids, true)) << name;
    }
  }
}

}  // namespace
}  // namespace lmx::test
