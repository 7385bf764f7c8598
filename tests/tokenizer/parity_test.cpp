// Every fixture string, for every tokenizer, against the ids and decodes Hugging Face
// `tokenizers` produced (scripts/make_tokenizer_fixtures.py): with and without special tokens,
// decode with and without skip_special_tokens, and the streaming property.
#include <gtest/gtest.h>

#include "tests/tokenizer/test_support.h"

namespace lmx::test {
namespace {

class Parity : public ::testing::TestWithParam<std::string> {};

std::string show(const std::string& s) { return ::testing::PrintToString(s); }

TEST_P(Parity, MatchesReference) {
  const std::string name = GetParam();
  const nlohmann::json fixture = load_fixture(name);
  const Tokenizer tok = load_named_tokenizer(name);
  int failures = 0;
  for (const auto& c : fixture.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const auto ids_ns = c.at("ids_no_special").get<std::vector<int32_t>>();
    const auto got = tok.encode(text, true);
    const auto got_ns = tok.encode(text, false);
    EXPECT_EQ(got, ids) << name << " text " << show(text);
    EXPECT_EQ(got_ns, ids_ns) << name << " (no special) text " << show(text);
    EXPECT_EQ(tok.decode(ids, false), c.at("decode").get<std::string>())
        << name << " decode " << show(text);
    EXPECT_EQ(tok.decode(ids, true), c.at("decode_skip").get<std::string>())
        << name << " decode skip_special " << show(text);
    EXPECT_EQ(stream_decode(tok, ids, false), tok.decode(ids, false))
        << name << " stream " << show(text);
    EXPECT_EQ(stream_decode(tok, ids, true), tok.decode(ids, true))
        << name << " stream skip " << show(text);
    failures += got != ids || got_ns != ids_ns;
    if (failures > 8) FAIL() << "stopping " << name << " after 8 mismatching strings";
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Parity,
                         ::testing::Values("llama2", "llama2_metaspace", "llama3", "qwen3", "gpt2",
                                           "bert", "stories260k", "tinystories-656k",
                                           "synth_unigram", "synth_wordpiece", "synth_bpe"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace lmx::test
