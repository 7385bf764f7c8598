// The pieces of lmx perplexity's protocol (cli/perplexity.h): paragraph splitting as Python's
// [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()] splits (what
// scripts/perplexity_reference.py and scripts/make_perplexity_fixture.py do), and the per-token
// negative log-likelihood in fp64.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/perplexity.h"

namespace lmx::cli {
namespace {

using Paragraphs = std::vector<std::string>;

TEST(SplitParagraphs, BlankLinesOfWhitespaceSplitAndEachParagraphIsStripped) {
  EXPECT_EQ(split_paragraphs("a\n\nb"), (Paragraphs{"a", "b"}));
  EXPECT_EQ(split_paragraphs("one\ntwo\n\nthree"), (Paragraphs{"one\ntwo", "three"}));
  // Whitespace-only lines split; runs of them make one break; inner indentation stays.
  EXPECT_EQ(split_paragraphs("  a\n  b  \n \t \n\n\nc\r\n\r\nd\n"), (Paragraphs{"a\n  b", "c", "d"}));
  EXPECT_EQ(split_paragraphs("\n\n  x  \n\n"), (Paragraphs{"x"}));
  EXPECT_EQ(split_paragraphs(""), Paragraphs{});
  EXPECT_EQ(split_paragraphs(" \n\t\n \r\n"), Paragraphs{});
  EXPECT_EQ(split_paragraphs("no newline at all"), (Paragraphs{"no newline at all"}));
}

TEST(TokenNll, MatchesTheDoubleFormula) {
  const std::vector<float> uniform(7, 0.25f);
  EXPECT_NEAR(token_nll(uniform.data(), 7, 3), std::log(7.0), 1e-12);
  std::vector<float> z = {1.5f, -2.0f, 30.0f, 0.0f, 29.5f};
  for (int t = 0; t < 5; ++t) {
    double sum = 0;
    for (float v : z) sum += std::exp(double(v));
    EXPECT_NEAR(token_nll(z.data(), 5, t), std::log(sum) - z[size_t(t)], 1e-9) << t;
  }
  // Large logits do not overflow: the max is taken out first.
  const std::vector<float> big = {1000.0f, 999.0f};
  EXPECT_NEAR(token_nll(big.data(), 2, 1), 1.0 + std::log1p(std::exp(-1.0)), 1e-12);
}

TEST(PerplexityResult, IsExpOfTheMeanNll) {
  const PerplexityResult r{3, 4, 2.0};
  EXPECT_DOUBLE_EQ(r.ppl(), std::exp(0.5));
}

}  // namespace
}  // namespace lmx::cli
