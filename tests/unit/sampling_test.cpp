// Sampling as the engine does it (SamplingParams -> kernels/sampling.h's CPU draw): greedy,
// penalties, filters, seeds and the sampled distribution itself.
#include <cmath>
#include <map>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/generate/sampling.h"
#include "kernels/sampling.h"

namespace lmx {
namespace {

// Draw number `step` of a request with parameters p (seed 0 when p has none).
SampledToken draw(const SamplingParams& p, const std::vector<float>& logits,
                  const std::vector<int32_t>& ctx = {}, uint64_t step = 0) {
  const kernels::SamplingRow row = p.row(p.seed.value_or(0), step);
  const int32_t len = int32_t(ctx.size());
  SampledToken t{};
  kernels::cpu::sample(logits.data(), 1, int(logits.size()), &row, ctx.empty() ? nullptr : ctx.data(),
                       len, ctx.empty() ? nullptr : &len, &t.id, &t.logprob);
  return t;
}

TEST(Sampling, GreedyIsArgmaxWithLogprob) {
  const SampledToken t = draw({}, {0.1f, 2.0f, -1.0f, 1.9f});
  EXPECT_EQ(t.id, 1);
  const double z = std::exp(0.1) + std::exp(2.0) + std::exp(-1.0) + std::exp(1.9);
  EXPECT_NEAR(t.logprob, 2.0 - std::log(z), 1e-5);
}

TEST(Sampling, RepetitionPenaltyFollowsHfRule) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  // Token 1 (2.0 -> 1.0) was seen; token 3 (1.9) now wins. Negative logits are multiplied.
  EXPECT_EQ(draw(p, {0.1f, 2.0f, -1.0f, 1.9f}, {1}).id, 3);
  EXPECT_EQ(draw(p, {-0.5f, -0.9f, -2.0f}, {0}).id, 1);  // -0.5 * 2 = -1.0 < -0.9
}

TEST(Sampling, TopKOneAndTinyTopPAreGreedy) {
  const std::vector<float> logits = {0.3f, 1.0f, 0.9f, -2.0f, 0.95f};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SamplingParams k1{.greedy = false, .temperature = 1.5f, .top_k = 1, .seed = seed};
    EXPECT_EQ(draw(k1, logits).id, 1);
    SamplingParams p0{.greedy = false, .temperature = 1.0f, .top_p = 1e-4f, .seed = seed};
    EXPECT_EQ(draw(p0, logits).id, 1);
  }
}

TEST(Sampling, SameSeedSameStreamDifferentSeedDiffers) {
  const std::vector<float> logits(64, 0.0f);
  auto run = [&](uint64_t seed) {
    std::vector<int32_t> ids;
    for (uint64_t step = 0; step < 32; ++step)
      ids.push_back(draw({.greedy = false, .seed = seed}, logits, {}, step).id);
    return ids;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

// Frequencies of 40k draws match softmax(logits / T) restricted by top-k / top-p.
TEST(Sampling, DistributionMatchesFilteredSoftmax) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f};
  const float T = 0.8f;
  std::vector<double> p(logits.size());
  double z = 0;
  for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(logits[i] / T);
  for (double& x : p) x /= z;
  // top_k 4 drops ids 4, 5; top_p 0.9 over the renormalised rest keeps ids 0..2 here when their
  // mass reaches 0.9 (checked below from the same numbers).
  std::vector<double> kept(p.begin(), p.begin() + 4);
  double kz = 0;
  for (double x : kept) kz += x;
  double cum = 0;
  size_t keep = 0;
  while (keep < kept.size()) {
    cum += kept[keep] / kz;
    ++keep;
    if (cum >= 0.9) break;
  }
  double keep_z = 0;
  for (size_t i = 0; i < keep; ++i) keep_z += kept[i];

  const SamplingParams params{.greedy = false, .temperature = T, .top_k = 4, .top_p = 0.9f, .seed = 7};
  std::map<int, int> counts;
  const int N = 40000;
  for (int i = 0; i < N; ++i) ++counts[draw(params, logits, {}, uint64_t(i)).id];
  for (size_t i = 0; i < logits.size(); ++i) {
    const double expected = i < keep ? kept[i] / keep_z : 0.0;
    EXPECT_NEAR(counts[int(i)] / double(N), expected, 0.01) << "token " << i;
  }
}

TEST(Sampling, InvalidParametersNameTheParameter) {
  auto message = [](SamplingParams p) {
    try {
      p.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({.greedy = false, .temperature = 0.0f}).find("temperature"), std::string::npos);
  EXPECT_NE(message({.top_k = -1}).find("top_k"), std::string::npos);
  EXPECT_NE(message({.top_p = 1.5f}).find("top_p"), std::string::npos);
  EXPECT_NE(message({.repetition_penalty = 0.0f}).find("repetition_penalty"), std::string::npos);
}

}  // namespace
}  // namespace lmx
