// The rank group (engine/parallel/rank_group.h): every rank runs the leader's steps, with the same
// chunks; a rank that fails to build its part fails the whole group without leaving any rank
// waiting; destroying the leader stops and joins the others.
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/parallel/rank_group.h"

namespace lmx {
namespace {

using ::testing::HasSubstr;

// What each rank saw: its steps, flattened to "start:tokens|blocks" strings.
struct Seen {
  std::mutex mutex;
  std::vector<std::vector<std::string>> steps;  // [rank][step]
};

// A backend that sums one float over the ranks in each forward (a collective, like a model's
// all-reduce) and records its chunks.
class RecordingRank final : public Backend {
 public:
  RecordingRank(Communicator& comm, Seen& seen) : comm_(comm), seen_(seen) {}
  const DecoderDesc& desc() const override { return desc_; }
  const KvCacheShape& kv_shape() const override { return kv_; }
  std::string name() const override { return "recording"; }
  std::string kv_cache_dtype_name() const override { return "fp32"; }

  void forward(std::span<const BatchChunk> chunks, std::vector<float>& logits) override {
    if (!chunks.empty() && chunks[0].tokens.empty()) throw_error("empty chunk");  // on every rank
    std::string s;
    for (const BatchChunk& c : chunks) {
      s += std::to_string(c.start_position) + ":";
      for (int32_t t : c.tokens) s += std::to_string(t) + ",";
      s += "|";
      for (int32_t b : c.block_table) s += std::to_string(b) + ",";
      s += c.compute_logits ? "L;" : ";";
    }
    float one = 1.0f;
    comm_.all_reduce_sum(&one, 1);
    logits.assign(1, one);  // the rank count
    std::lock_guard lock(seen_.mutex);
    seen_.steps[size_t(comm_.rank())].push_back(s);
  }

 private:
  Communicator& comm_;
  Seen& seen_;
  DecoderDesc desc_;
  KvCacheShape kv_;
};

TEST(RankGroup, EveryRankRunsTheLeadersSteps) {
  for (int degree : {1, 2, 4}) {
    Seen seen;
    seen.steps.resize(size_t(degree));
    {
      auto group = make_thread_group(
          degree, [&](Communicator& c) { return std::make_unique<RecordingRank>(c, seen); });
      EXPECT_EQ(group->tensor_parallel_degree(), degree);
      const std::vector<int32_t> a = {5, 6, 7}, b = {9}, ta = {0, 1}, tb = {3};
      std::vector<float> logits;
      for (int step = 0; step < 50; ++step) {
        const BatchChunk chunks[] = {{a, step, ta, false}, {b, 2 * step, tb, true}};
        group->forward(step % 2 ? std::span(chunks, 1) : std::span(chunks), logits);
        EXPECT_EQ(logits, std::vector<float>{float(degree)});
      }
      // A step that fails fails alike on every rank; the group goes on.
      const BatchChunk bad[] = {{{}, 0, ta, true}};
      EXPECT_THROW(group->forward(bad, logits), Error);
      const BatchChunk last[] = {{b, 7, tb, true}};
      group->forward(last, logits);
    }  // the leader stops and joins the other ranks
    ASSERT_EQ(seen.steps[0].size(), 51u);
    for (int r = 1; r < degree; ++r)
      EXPECT_EQ(seen.steps[size_t(r)], seen.steps[0]) << "rank " << r;
  }
}

TEST(RankGroup, ARankThatFailsToBuildFailsTheGroup) {
  Seen seen;
  seen.steps.resize(3);
  auto build = std::async(std::launch::async, [&] {
    return make_thread_group(3, [&](Communicator& c) -> std::unique_ptr<Backend> {
      if (c.rank() == 2) throw_error("rank 2 is out of memory");
      return std::make_unique<RecordingRank>(c, seen);
    });
  });
  ASSERT_EQ(build.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "deadlock";
  try {
    build.get();
    ADD_FAILURE() << "the group was built";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 2 is out of memory"));
  }
}

}  // namespace
}  // namespace lmx
