// Sampling as the engine does it (SamplingParams -> kernels/sampling.h's CPU draw): greedy,
// penalties, filters, seeds and the sampled distribution itself.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/generate/sampling.h"
#include "engine/generate/top_logprobs.h"
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

// Both ends of every range give a defined result (docs/serving.md, "Sampling"), and just past
// them a 400 naming the parameter and the range.
TEST(Sampling, EveryRangeEndIsDefined) {
  auto accepted = [](SamplingParams p) {
    try {
      p.validate();
      return true;
    } catch (const RequestError&) {
      return false;
    }
  };
  // Logits as large as fp32 models produce, and a near tie: the greedy answer is index 1.
  const std::vector<float> logits = {9000.0f, 9000.5f, -9000.0f, 8999.0f, 0.0f};
  const float max_float = std::numeric_limits<float>::max();
  for (float t : {1e-40f, 1e-30f, 9.9e-6f, 1e-5f, 1e-3f, 1.0f, 1e30f, max_float}) {
    SCOPED_TRACE("temperature " + std::to_string(t));
    for (uint64_t seed = 0; seed < 20; ++seed) {
      const SamplingParams p{.greedy = false, .temperature = t, .seed = seed};
      ASSERT_TRUE(accepted(p));
      const SampledToken d = draw(p, logits);
      EXPECT_TRUE(d.id >= 0 && d.id < 5 && std::isfinite(d.logprob));
      if (t < 1e-3f) {  // (at 1e-5 the gap is 50,000 logits)
        EXPECT_EQ(d.id, 1) << "seed " << seed;
      }
    }
  }
  // Below kGreedyTemperature it is the argmax itself, whatever the seed.
  EXPECT_EQ(draw({.greedy = false, .temperature = 1e-40f, .seed = 3}, {0.0f, 1e-7f}).id, 1);
  EXPECT_FALSE(accepted({.greedy = false, .temperature = 0.0f}));
  EXPECT_FALSE(accepted({.greedy = false, .temperature = std::numeric_limits<float>::infinity()}));

  for (float r : {kMinRepetitionPenalty, kMaxRepetitionPenalty}) {
    for (bool greedy : {true, false}) {
      const SamplingParams p{.greedy = greedy, .repetition_penalty = r, .seed = 7};
      ASSERT_TRUE(accepted(p));
      const SampledToken d = draw(p, {1e4f, -1e4f, 3.0f, -3.0f}, {0, 1, 3});
      EXPECT_TRUE(std::isfinite(d.logprob));
      // 1e-4 rewards the history (1e4 / 1e-4 = 1e8 wins); 1e4 penalizes it (3.0 wins).
      if (greedy) {
        EXPECT_EQ(d.id, r < 1 ? 0 : 2);
      }
    }
  }
  for (float r : {0.0f, 9.9e-5f, 1.01e4f, 1e-40f, std::numeric_limits<float>::infinity()}) {
    SamplingParams p{.repetition_penalty = r};
    EXPECT_FALSE(accepted(p)) << r;
  }
  EXPECT_TRUE(accepted({.greedy = false, .top_k = std::numeric_limits<int>::max()}));
  EXPECT_EQ(draw({.greedy = false, .top_k = std::numeric_limits<int>::max(), .seed = 1}, {0.f, 1.f})
                .id >= 0, true);
  EXPECT_TRUE(accepted({.greedy = false, .top_p = 1e-45f}));  // the smallest: one token kept
  EXPECT_EQ(draw({.greedy = false, .top_p = 1e-45f, .seed = 9}, logits).id, 1);
  EXPECT_FALSE(accepted({.top_p = 0.0f}));
  EXPECT_FALSE(accepted({.top_p = 1.0000001f}));
  EXPECT_TRUE(accepted({.greedy = false, .seed = std::numeric_limits<uint64_t>::max()}));
}

// top_logprobs: the k largest logits, most likely first (ties: lower id), each the log-softmax
// value computed in double from the formula; k past the vocabulary gives the whole vocabulary.
TEST(TopLogprobs, AreTheLargestLogSoftmaxValuesInOrder) {
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, -100.0f};
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x));
  const auto lp = [&](int id) { return float(double(logits[size_t(id)]) - std::log(sum)); };
  const auto top = top_logprobs(logits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1);  // tie with 3: the lower id first
  EXPECT_EQ(top[1].id, 3);
  EXPECT_EQ(top[2].id, 4);
  for (const SampledToken& t : top) EXPECT_NEAR(t.logprob, lp(t.id), 1e-6) << t.id;
  EXPECT_EQ(top_logprobs(logits, 10).size(), logits.size());
  EXPECT_EQ(top_logprobs(logits, 10).back().id, 5);
  EXPECT_TRUE(top_logprobs(logits, 0).empty());
  // Large logits: max-subtracted, no overflow.
  const std::vector<float> big = {1e30f, 1e30f - 1e24f, -1e30f};
  const auto b = top_logprobs(big, 2);
  EXPECT_TRUE(std::isfinite(b[0].logprob) && std::isfinite(b[1].logprob));
  EXPECT_LE(b[0].logprob, 0.0f);
}

// Rows split over `ranks` vocabulary shards of ceil(vocab / ranks) columns (the last padded with
// values the draw must not read), drawn by draw_partials + combine_draws: the token sample() draws
// from the whole row, and its log-prob within float rounding.
TEST(ShardedDraw, EqualsTheDrawOverTheWholeRow) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int n = 24;
  for (int vocab : {1, 7, 50, 1003}) {
    std::vector<float> logits(size_t(n) * vocab);
    for (float& l : logits) l = normal(rng);
    for (int r = 0; r < n; r += 4)  // exact ties between two ids, possibly on different ranks
      logits[size_t(r) * vocab + rng() % vocab] = logits[size_t(r) * vocab + rng() % vocab] = 40.0f;
    std::vector<kernels::SamplingRow> params(n);
    for (int r = 0; r < n; ++r) {
      params[r].greedy = r % 3 == 0;
      params[r].temperature = 0.3f + 0.4f * float(r % 4);
      params[r].seed = rng();
      params[r].step = uint64_t(r);
      params[r].top_k = r % 5 == 1 ? vocab : 0;  // top-k of the whole vocabulary is off
      ASSERT_TRUE(kernels::shardable_draw(params[r], vocab));
    }
    std::vector<int32_t> want_ids(n);
    std::vector<float> want_lp(n);
    kernels::cpu::sample(logits.data(), n, vocab, params.data(), nullptr, 0, nullptr,
                         want_ids.data(), want_lp.data());
    for (int ranks = 1; ranks <= 4; ++ranks) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + ", ranks " + std::to_string(ranks));
      const int per = (vocab + ranks - 1) / ranks;
      std::vector<kernels::DrawPartial> parts(size_t(ranks) * n);
      for (int k = 0; k < ranks; ++k) {
        const int first = k * per, cols = std::clamp(vocab - first, 0, per);
        std::vector<float> shard(size_t(n) * per, std::numeric_limits<float>::infinity());
        for (int r = 0; r < n; ++r)
          std::copy_n(logits.begin() + ptrdiff_t(r) * vocab + first, cols,
                      shard.begin() + ptrdiff_t(r) * per);
        kernels::cpu::draw_partials(shard.data(), n, per, cols, first, params.data(),
                                    parts.data() + size_t(k) * n);
      }
      std::vector<int32_t> ids(n);
      std::vector<float> lp(n);
      kernels::cpu::combine_draws(parts.data(), ranks, n, ids.data(), lp.data());
      EXPECT_EQ(ids, want_ids);
      for (int r = 0; r < n; ++r)
        EXPECT_NEAR(lp[r], want_lp[r], 1e-5 * std::max(1.0f, std::abs(want_lp[r]))) << "row " << r;
    }
  }
}

TEST(ShardedDraw, OnlyRowsWithoutFiltersOrPenaltyAreShardable) {
  kernels::SamplingRow p;
  EXPECT_TRUE(kernels::shardable_draw(p, 100));
  p.top_k = 99;
  EXPECT_FALSE(kernels::shardable_draw(p, 100));
  p.top_k = 0;
  p.top_p = 0.9f;
  EXPECT_FALSE(kernels::shardable_draw(p, 100));
  p.top_p = 1.0f;
  p.repetition_penalty = 1.1f;
  EXPECT_FALSE(kernels::shardable_draw(p, 100));
}

}  // namespace
}  // namespace lmx
