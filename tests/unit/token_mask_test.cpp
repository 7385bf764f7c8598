// The constrained decoder's vocabulary side on real tokenizers (scripts/fetch_tokenizers.sh's
// cache): Tokenizer::token_bytes, and TokenTrie::allowed equal to advancing every token's bytes
// one token at a time; its time on Qwen3's 151k vocabulary is printed.
#include <chrono>

#include <gtest/gtest.h>

#include "engine/generate/token_constraint.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/tokenizer/test_support.h"

namespace lmx {
namespace {

using nlohmann::json;

std::string bytes_of(const Tokenizer& t, std::string_view text) {
  std::string out;
  for (int32_t id : t.encode(text, false)) out += t.token_bytes(id).value_or("<none>");
  return out;
}

TEST(TokenBytes, ByteLevelAndSentencePiece) {
  for (const char* name : {"qwen3", "llama3", "llama2"}) {
    const Tokenizer t = test::load_named_tokenizer(name);
    // Mid-sequence text: the concatenated bytes are the text (a leading space included; Llama
    // 2's normalizer prepends one more to the input).
    const std::string added = std::string(name) == "llama2" ? " " : "";
    for (const char* text :
         {" hello world", " {\"name\": \"x\"}\n", " caf\xC3\xA9 \xE2\x82\xAC\xF0\x9F\x98\x80"})
      EXPECT_EQ(bytes_of(t, text), added + text) << name << ": " << text;
    EXPECT_FALSE(t.token_bytes(*t.eos_id()).has_value()) << name;
  }
  const Tokenizer qwen = test::load_named_tokenizer("qwen3");
  EXPECT_EQ(qwen.token_bytes(*qwen.token_to_id("<tool_call>")), "<tool_call>");  // not special
  const Tokenizer llama2 = test::load_named_tokenizer("llama2");
  EXPECT_EQ(llama2.token_bytes(*llama2.token_to_id("<0x0A>")), "\n");
  EXPECT_EQ(llama2.token_bytes(*llama2.token_to_id("\u2581the")), " the");
}

// allowed() against the definition: every id whose bytes the state accepts in full.
void expect_mask_matches(const TokenTrie& trie, const Tokenizer& t, const JsonRecognizer& state,
                         const std::string& where) {
  const size_t vocab = size_t(t.vocab_size());
  std::vector<uint8_t> mask(vocab + 7,
                            2);  // padded beyond the tokenizer, as model vocabularies are
  trie.allowed(state, mask);
  size_t allowed = 0, mismatches = 0;
  for (size_t id = 0; id < mask.size(); ++id) {
    const std::string* b = trie.bytes(int32_t(id));
    JsonRecognizer copy = state;
    const bool want = b != nullptr && copy.advance(*b);
    allowed += want;
    if (mask[id] != uint8_t(want) && mismatches++ < 5)
      ADD_FAILURE() << where << ": id " << id << " mask " << int(mask[id]) << " expected " << want;
  }
  EXPECT_GT(allowed, 0u) << where;
}

TEST(TokenMask, MatchesTheRecognizerOnRealVocabularies) {
  const json schema = json::parse(R"({"type": "object", "required": ["city"],
      "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}})");
  const JsonGrammar g{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
                      JsonSchema::compile(schema, "parameters", kJsonObject), "}\n</tool_call>"};
  for (const char* name : {"qwen3", "llama2"}) {
    const Tokenizer t = test::load_named_tokenizer(name);
    const TokenTrie trie = TokenTrie::of(t);
    JsonRecognizer r(g);
    // States: the start, inside the prefix, before a key, inside a string, inside the enum,
    // after the value, inside the suffix.
    const char* steps[] = {"",
                           "<tool",
                           "_call>\n{\"name\": \"get_weather\", \"arguments\": {",
                           "\"city\": \"Par",
                           "is\", \"unit\": \"",
                           "f\"}",
                           "}\n</tool"};
    for (const char* step : steps) {
      ASSERT_TRUE(r.advance(std::string_view(step))) << step;
      expect_mask_matches(trie, t, r, std::string(name) + " after '" + step + "'");
    }
  }
}

TEST(TokenMask, TimeOnA150kVocabulary) {
  const Tokenizer t = test::load_named_tokenizer("qwen3");
  const auto t0 = std::chrono::steady_clock::now();
  const TokenTrie trie = TokenTrie::of(t);
  const auto t1 = std::chrono::steady_clock::now();
  const JsonGrammar g{"", JsonSchema::compile(json::object(), "p"), ""};
  std::vector<uint8_t> mask(size_t(t.vocab_size()));
  // The most permissive state (inside a string: nearly every token goes on) and a narrow one.
  for (const char* prefix : {"{\"a\": \"x", "{\"a\""}) {
    JsonRecognizer r(g);
    ASSERT_TRUE(r.advance(std::string_view(prefix)));
    constexpr int kRuns = 5;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRuns; ++i) trie.allowed(r, mask);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count() /
        kRuns;
    size_t n = 0;
    for (uint8_t m : mask) n += m;
    std::printf(
        "qwen3 (%d ids, %zu trie nodes, built in %.0f ms): mask after '%s': %.1f ms, "
        "%zu allowed\n",
        t.vocab_size(), trie.nodes(), std::chrono::duration<double, std::milli>(t1 - t0).count(),
        prefix, ms, n);
  }
}

}  // namespace
}  // namespace lmx
