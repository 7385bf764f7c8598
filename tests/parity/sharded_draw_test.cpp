// Tensor-parallel ranks draw tokens from their own vocabulary shards (kernels/sampling.h,
// DrawPartial): on every parity fixture at every degree that splits it, a batch of greedy and
// seeded rows drawn by forward_sample equals the draw over the gathered logits of the same step,
// and the leader gathers 20 bytes a row instead of the logits.
#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "engine/backend/cpu_backend.h"
#include "engine/core/error.h"
#include "engine/model/model.h"
#include "engine/model/shard.h"
#include "engine/parallel/communicator.h"
#include "kernels/sampling.h"
#include "tests/support/parity_fixtures.h"
#include "tests/support/splitting_degrees.h"

namespace lmx {
namespace {

// A communicator that records the sizes of the all-gathers made through it.
class GatherRecorder final : public Communicator {
 public:
  explicit GatherRecorder(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void all_reduce_sum(float* data, size_t n) override { inner_.all_reduce_sum(data, n); }
  void all_gather(const float* in, float* out, size_t n) override {
    gathers.push_back(n);
    inner_.all_gather(in, out, n);
  }
  void broadcast(float* data, size_t n, int root) override { inner_.broadcast(data, n, root); }
  void broadcast_bytes(void* data, size_t bytes, int root) override {
    inner_.broadcast_bytes(data, bytes, root);
  }
  std::vector<size_t> gathers;

 private:
  Communicator& inner_;
};

// Runs `work(rank)` on one thread a rank and waits for all of them.
void on_every_rank(int ranks, const std::function<void(int)>& work) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back(work, r);
  for (std::thread& t : threads) t.join();
}

class ShardedDraw : public ::testing::TestWithParam<std::string> {};

TEST_P(ShardedDraw, RanksDrawTheGatheredRowsTokenWithoutGatheringThem) {
  const auto f = testing::open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  const int V = model.desc.vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& c : f.expected["cases"]) prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
  const int rows = int(prompts.size()), steps = 4, block = 16;
  int longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, int(p.size()) + steps);
  const int blocks_each = (longest + block - 1) / block;
  const KvCacheShape kv{block, rows * blocks_each};

  for (int degree : testing::splitting_degrees(model.desc)) {
    SCOPED_TRACE("degree " + std::to_string(degree));
    auto comms = make_local_communicators(degree);
    std::vector<std::unique_ptr<GatherRecorder>> recorders;
    for (auto& c : comms) recorders.push_back(std::make_unique<GatherRecorder>(*c));
    std::vector<std::unique_ptr<Backend>> ranks(static_cast<size_t>(degree));
    on_every_rank(degree, [&](int r) {
      ranks[size_t(r)] = make_cpu_rank_backend(model, kv, *recorders[size_t(r)]);
    });
    ASSERT_TRUE(ranks[0]->draws_sharded());

    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(rows));
    for (int i = 0; i < rows; ++i)
      for (int b = 0; b < blocks_each; ++b) tables[size_t(i)].push_back(i * blocks_each + b);
    std::vector<std::vector<int32_t>> next = prompts;  // each row's tokens of the step
    std::vector<int> start(static_cast<size_t>(rows), 0);
    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      std::vector<BatchChunk> chunks;
      std::vector<SampleSpec> specs(static_cast<size_t>(rows));
      for (int i = 0; i < rows; ++i) {
        chunks.push_back({next[size_t(i)], start[size_t(i)], tables[size_t(i)], true});
        kernels::SamplingRow& p = specs[size_t(i)].params;
        p.greedy = i % 2 == 0;  // greedy and seeded rows
        p.temperature = 0.7f + 0.3f * float(i);
        p.seed = 1000 + uint64_t(i);
        p.step = uint64_t(step);
      }
      std::vector<kernels::SamplingRow> params;
      for (const SampleSpec& s : specs) params.push_back(s.params);

      // The ranks draw together...
      for (auto& r : recorders) r->gathers.clear();
      std::vector<SampledToken> drawn(static_cast<size_t>(rows));
      on_every_rank(degree, [&](int r) {
        if (r == 0)
          ranks[0]->forward_sample(chunks, specs, drawn);
        else
          ranks[size_t(r)]->forward_sample_discard(chunks, params);
      });
      EXPECT_EQ(recorders[0]->gathers,
                std::vector<size_t>{size_t(rows) * sizeof(kernels::DrawPartial) / sizeof(float)})
          << "the draw gathered more than the ranks' partials";

      // ... the token the whole gathered row gives (the same step again: same K/V written).
      std::vector<float> logits;
      on_every_rank(degree, [&](int r) {
        if (r == 0)
          ranks[0]->forward(chunks, logits);
        else
          ranks[size_t(r)]->forward_discard(chunks);
      });
      ASSERT_EQ(logits.size(), size_t(rows) * V);
      std::vector<int32_t> ids(static_cast<size_t>(rows));
      std::vector<float> logprobs(static_cast<size_t>(rows));
      kernels::cpu::sample(logits.data(), rows, V, params.data(), nullptr, 0, nullptr, ids.data(),
                           logprobs.data());
      for (int i = 0; i < rows; ++i) {
        EXPECT_EQ(drawn[size_t(i)].id, ids[size_t(i)]) << "row " << i;
        EXPECT_NEAR(drawn[size_t(i)].logprob, logprobs[size_t(i)],
                    1e-5 * std::max(1.0f, std::abs(logprobs[size_t(i)])))
            << "row " << i;
        start[size_t(i)] += int(next[size_t(i)].size());
        next[size_t(i)] = {drawn[size_t(i)].id};
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ShardedDraw, ::testing::ValuesIn(testing::parity_fixture_names()),
                         testing::ParityNamePrinter());

}  // namespace
}  // namespace lmx
