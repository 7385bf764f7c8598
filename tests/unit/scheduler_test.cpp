// Continuous batching on the CPU backend: join/leave, chunked prefill, preemption under a tiny KV
// capacity, cancellation, per-request parameters and batch independence. The reference tokens
// are transformers' greedy ids from the parity fixtures.
#include <fstream>
#include <limits>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/backend/cpu_backend.h"
#if LMX_HAVE_CUDA_BACKEND
#include "engine/backend/cuda/cuda_backend.h"
#endif
#include "engine/core/error.h"
#include "engine/generate/generator.h"
#include "engine/model/model.h"
#include "engine/scheduler/scheduler.h"
#include "tests/support/require_gpu.h"

namespace lmx {
namespace {

const std::filesystem::path kFixture = std::filesystem::path(LMX_FIXTURES_DIR) / "parity/llama_gqa_llama3_bias";

struct Case {
  std::vector<int32_t> prompt, expected;
};

std::vector<Case> cases() {
  std::ifstream in(kFixture / "expected.json");
  const auto j = nlohmann::json::parse(in);
  std::vector<Case> out;
  for (const auto& c : j["cases"]) out.push_back({c["prompt_ids"], c["greedy_ids"]});
  return out;
}

SchedulerRequest greedy(uint64_t id, const Case& c) {
  SchedulerRequest r;
  r.id = id;
  r.prompt = c.prompt;
  r.params.max_new_tokens = int(c.expected.size());
  r.params.ignore_eos = true;
  return r;
}

// Runs the scheduler to completion; `each_step` may add or cancel requests between steps.
std::map<uint64_t, std::vector<int32_t>> drain(Scheduler& s, const std::function<void(int)>& each_step = {}) {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  for (int step = 0; s.has_work() || (each_step && step < 3); ++step) {
    if (each_step) each_step(step);
    for (const TokenOutput& o : s.step()) tokens[o.id].push_back(o.token.id);
    if (step > 10000) {  // a stalled scheduler fails once and stops, never loops forever
      ADD_FAILURE() << "no progress after " << step << " steps";
      break;
    }
  }
  return tokens;
}

// Every test runs on the CPU backend and, where a GPU is present, on the CUDA backend in fp32
// (whose greedy ids equal transformers' too).
class SchedulerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
#if LMX_HAVE_CUDA_BACKEND
    if (GetParam() == "cuda") {
      LMX_GPU_SKIP_UNLESS(cuda_device_available(),
                          "no CUDA GPU on this machine: run scripts/gpu_tests.sh on the device");
    }
#endif
  }

  // Every case at once with `blocks` KV blocks, `adjust(request, index)` applied to each: the
  // tokens by request and the number of preemptions.
  std::pair<std::map<uint64_t, std::vector<int32_t>>, long> run_cases(
      int blocks, const std::function<void(SchedulerRequest&, size_t)>& adjust) {
    auto b = backend(blocks);
    Scheduler s(*b, {.max_running = 8, .max_step_tokens = 64});
    for (size_t i = 0; i < cases_.size(); ++i) {
      SchedulerRequest r = greedy(i, cases_[i]);
      adjust(r, i);
      s.add(r);
    }
    auto out = drain(s);
    return {out, s.stats().preemptions};
  }

  std::unique_ptr<Backend> backend(int blocks, int block_size = 4) {
#if LMX_HAVE_CUDA_BACKEND
    if (GetParam() == "cuda") {
      CudaBackendOptions o;
      o.dtype = CudaDtype::F32;
      o.kv_block_size = block_size;
      o.kv_blocks = blocks;
      o.max_step_tokens = 512;
      o.max_sequences = 16;
      return make_cuda_backend(model_, o);
    }
#endif
    return make_cpu_backend(model_, {block_size, blocks});
  }
  LoadedModel model_ = load_model(kFixture);
  std::vector<Case> cases_ = cases();
};

TEST_P(SchedulerTest, ChunkedPrefillUnderSmallBudgetMatchesHf) {
  auto b = backend(256);
  Scheduler s(*b, {.max_running = 8, .max_step_tokens = 5});  // 33-token prompt -> 7 chunks
  for (size_t i = 0; i < cases_.size(); ++i) s.add(greedy(i, cases_[i]));
  const auto out = drain(s);
  for (size_t i = 0; i < cases_.size(); ++i) EXPECT_EQ(out.at(i), cases_[i].expected) << i;
}

TEST_P(SchedulerTest, RequestsJoinWhileOthersDecode) {
  auto b = backend(256);
  Scheduler s(*b, {.max_running = 8, .max_step_tokens = 64});
  s.add(greedy(0, cases_[0]));
  const auto out = drain(s, [&](int step) {
    if (step == 3) s.add(greedy(1, cases_[1]));
    if (step == 9) s.add(greedy(2, cases_[2]));
  });
  for (size_t i = 0; i < cases_.size(); ++i) EXPECT_EQ(out.at(i), cases_[i].expected) << i;
}

// last_step() tells decode tokens from prompt tokens: chunks of a prompt under a small budget,
// then the decode token riding beside the next prompt's chunk, then decode only.
TEST_P(SchedulerTest, LastStepCountsDecodeAndPromptTokens) {
  auto b = backend(256);
  Scheduler s(*b, {.max_running = 8, .max_step_tokens = 64});
  const size_t first = cases_[0].prompt.size(), second = cases_[1].prompt.size();
  ASSERT_LE(first, 64u);
  ASSERT_LE(second, 63u);
  s.add(greedy(0, cases_[0]));
  s.step();
  EXPECT_EQ(s.last_step().decode_tokens, 0);
  EXPECT_EQ(s.last_step().prompt_tokens, int(first));
  s.add(greedy(1, cases_[1]));
  s.step();
  EXPECT_EQ(s.last_step().decode_tokens, 1);
  EXPECT_EQ(s.last_step().prompt_tokens, int(second));
  s.step();
  EXPECT_EQ(s.last_step().decode_tokens, 2);
  EXPECT_EQ(s.last_step().prompt_tokens, 0);
}

TEST_P(SchedulerTest, MaxRunningCapsTheBatch) {
  auto b = backend(256);
  Scheduler s(*b, {.max_running = 1, .max_step_tokens = 64});
  for (size_t i = 0; i < cases_.size(); ++i) s.add(greedy(i, cases_[i]));
  s.step();
  EXPECT_EQ(s.stats().running, 1);
  EXPECT_EQ(s.stats().waiting, 2);
  const auto out = drain(s);
  for (size_t i = 1; i < cases_.size(); ++i) EXPECT_EQ(out.at(i), cases_[i].expected) << i;
}

// 15 blocks of 4 = 60 tokens for 3 sequences needing 25 + 31 + 57: sequences must be preempted
// and recomputed, and still produce HF's tokens; every request finishes.
TEST_P(SchedulerTest, PreemptionUnderTinyKvCapacityLosesNothing) {
  auto b = backend(15);
  Scheduler s(*b, {.max_running = 8, .max_step_tokens = 64});
  for (size_t i = 0; i < cases_.size(); ++i) s.add(greedy(i, cases_[i]));
  const auto out = drain(s);
  for (size_t i = 0; i < cases_.size(); ++i) EXPECT_EQ(out.at(i), cases_[i].expected) << i;
  EXPECT_GT(s.stats().preemptions, 0);
  EXPECT_EQ(s.stats().kv_blocks_used, 0);
}

TEST_P(SchedulerTest, RequestLargerThanTheWholeCacheIsRejected) {
  auto b = backend(4);  // 16 tokens
  Scheduler s(*b, {});
  try {
    s.add(greedy(0, cases_[2]));
    FAIL();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.field(), "parameters.max_new_tokens");
    EXPECT_NE(std::string(e.what()).find("KV cache (16 tokens)"), std::string::npos) << e.what();
  }
}

TEST_P(SchedulerTest, CancelFreesBlocksAtOnceOthersUnaffected) {
  auto b = backend(64);
  Scheduler s(*b, {.max_running = 8, .max_step_tokens = 64});
  s.add(greedy(0, cases_[2]));
  s.add(greedy(1, cases_[1]));
  s.step();
  const int used_before = s.stats().kv_blocks_used;
  EXPECT_TRUE(s.remove(0));
  EXPECT_LT(s.stats().kv_blocks_used, used_before);
  EXPECT_FALSE(s.remove(0));
  const auto out = drain(s);
  EXPECT_EQ(out.count(0), 0u);
  std::vector<int32_t> rest = out.at(1);
  std::vector<int32_t> expected = cases_[1].expected;
  expected.erase(expected.begin());  // the first token came out of the step above
  EXPECT_EQ(rest, expected);
}

TEST_P(SchedulerTest, GreedyIsIndependentOfSampledNeighbours) {
  auto b = backend(256);
  Scheduler s(*b, {.max_running = 8, .max_step_tokens = 64});
  s.add(greedy(0, cases_[1]));
  for (uint64_t i = 1; i <= 4; ++i) {
    SchedulerRequest r = greedy(i, cases_[i % 3]);
    r.params.sampling = {.greedy = false, .temperature = 0.5f + 0.3f * i, .top_k = int(i) * 7,
                         .top_p = 0.9f, .repetition_penalty = 1.1f, .seed = i};
    s.add(r);
  }
  const auto out = drain(s);
  EXPECT_EQ(out.at(0), cases_[1].expected);
}

TEST_P(SchedulerTest, SeededSamplingIsReproducibleInAnyBatch) {
  auto sampled = [&](bool busy) {
    auto b = backend(256);
    Scheduler s(*b, {.max_running = 8, .max_step_tokens = 64});
    SchedulerRequest r = greedy(0, cases_[1]);
    r.params.sampling = {.greedy = false, .temperature = 1.3f, .top_p = 0.95f, .seed = 1234};
    s.add(r);
    if (busy)
      for (uint64_t i = 1; i < 4; ++i) s.add(greedy(i, cases_[i % 3]));
    return drain(s).at(0);
  };
  EXPECT_EQ(sampled(false), sampled(true));
}

// A draw is a function of (logits, seed, tokens generated so far): a sampled sequence that is
// preempted and recomputed draws exactly the tokens it drew before, so it matches a run with
// room for everyone.
TEST_P(SchedulerTest, PreemptedSampledSequencesDrawTheSameTokens) {
  const auto sample = [](SchedulerRequest& r, size_t i) {
    r.params.sampling = {.greedy = false, .temperature = 1.5f, .top_p = 0.95f, .seed = 77 + i};
  };
  const auto [roomy, none] = run_cases(256, sample);
  const auto [tight, some] = run_cases(15, sample);
  EXPECT_EQ(none, 0);
  EXPECT_GT(some, 0);
  EXPECT_EQ(roomy, tight);
}

// A constrained sequence's recognizer moves only on the tokens it draws, which preemption keeps:
// under a tight KV cache, constrained sampled sequences draw what they draw with room, and every
// text is one the grammar accepts. (The fixture's 256 ids stand for the 256 bytes.)
TEST_P(SchedulerTest, PreemptedConstrainedSequencesDrawTheSameTokens) {
  std::vector<std::optional<std::string>> bytes(256);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::string(1, char(i));
  const auto trie = std::make_shared<const TokenTrie>(std::move(bytes));
  const nlohmann::json schema = nlohmann::json::parse(R"({"type": "object", "required": ["k"],
      "properties": {"k": {"type": "array", "items": {"type": "integer"}}}})");
  const auto grammar =
      std::make_shared<const JsonGrammar>(JsonGrammar{"x=", JsonSchema::compile(schema, "s"), ";"});
  const auto constrain = [&](SchedulerRequest& r, size_t i) {
    r.params.sampling = {.greedy = false, .temperature = 1.5f, .seed = 5 + i};
    r.params.constraint = std::make_shared<JsonTokenConstraint>(grammar, trie);
  };
  const auto [roomy, none] = run_cases(256, constrain);
  const auto [tight, some] = run_cases(15, constrain);
  EXPECT_EQ(none, 0);
  EXPECT_GT(some, 0);
  EXPECT_EQ(roomy, tight);
  for (const auto& [id, tokens] : roomy) {
    JsonRecognizer r(*grammar);
    std::string text;
    for (int32_t t : tokens) text += char(t);
    EXPECT_TRUE(r.advance(std::string_view(text))) << text;
    EXPECT_GE(text.size(), 3u);
  }
}

// Without a seed every request gets its own: two sampled requests for the same prompt differ.
TEST_P(SchedulerTest, SampledRequestsWithoutSeedDiffer) {
  auto b = backend(256);
  Scheduler s(*b, {.max_running = 8, .max_step_tokens = 64});
  for (uint64_t i = 0; i < 2; ++i) {
    SchedulerRequest r = greedy(i, cases_[1]);
    r.params.sampling = {.greedy = false, .temperature = 2.0f};
    s.add(r);
  }
  const auto out = drain(s);
  ASSERT_GE(out.at(0).size(), 10u);
  EXPECT_NE(out.at(0), out.at(1));  // a chance match of every token is negligible at T = 2
}

TEST_P(SchedulerTest, EosStopsUnlessIgnored) {
  auto b = backend(256);
  Scheduler s(*b, {});
  SchedulerRequest r = greedy(0, cases_[1]);
  const int32_t third = cases_[1].expected[2];
  r.params.stop_token_ids = {third};
  s.add(r);
  std::vector<TokenOutput> outs;
  while (s.has_work())
    for (auto& o : s.step()) outs.push_back(o);
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_TRUE(outs.back().finished);
  EXPECT_EQ(outs.back().reason, FinishReason::StopSequence);
}

#if LMX_HAVE_CUDA_BACKEND
INSTANTIATE_TEST_SUITE_P(Backends, SchedulerTest, ::testing::Values("cpu", "cuda"));
#else
INSTANTIATE_TEST_SUITE_P(Backends, SchedulerTest, ::testing::Values("cpu"));
#endif

// A backend whose logits turn NaN for one sequence (the one whose KV blocks start with the first
// chunk's first block of the first step), from its `from_step`th step on.
class PoisonOneSequence final : public Backend {
 public:
  PoisonOneSequence(std::unique_ptr<Backend> inner, int from_step)
      : inner_(std::move(inner)), from_step_(from_step) {}
  const DecoderDesc& desc() const override { return inner_->desc(); }
  const KvCacheShape& kv_shape() const override { return inner_->kv_shape(); }
  std::string name() const override { return inner_->name(); }
  std::string kv_cache_dtype_name() const override { return inner_->kv_cache_dtype_name(); }
  void forward(std::span<const BatchChunk> chunks, std::vector<float>& logits) override {
    inner_->forward(chunks, logits);
    if (victim_block_ < 0) victim_block_ = chunks[0].block_table[0];
    const size_t V = size_t(desc().vocab_size);
    size_t row = 0;
    for (const BatchChunk& c : chunks) {
      if (!c.compute_logits) continue;
      if (c.block_table[0] == victim_block_ && steps_ >= from_step_)
        logits[row * V + 3] = std::numeric_limits<float>::quiet_NaN();
      ++row;
    }
    ++steps_;
  }

 private:
  std::unique_ptr<Backend> inner_;
  int from_step_, steps_ = 0;
  int32_t victim_block_ = -1;
};

// Non-finite logits fail that request alone, with a clear error; its batch neighbour finishes
// with transformers' tokens.
TEST(SchedulerErrors, NonFiniteLogitsFailOnlyThatRequest) {
  const LoadedModel model = load_model(kFixture);
  const auto cs = cases();
  PoisonOneSequence backend(make_cpu_backend(model, {4, 256}), 3);
  Scheduler s(backend, {8, 512});
  s.add(greedy(1, cs[1]));
  s.add(greedy(2, cs[2]));
  std::map<uint64_t, std::vector<TokenOutput>> outs;
  for (int step = 0; s.has_work() && step < 1000; ++step)
    for (TokenOutput& o : s.step()) outs[o.id].push_back(std::move(o));
  ASSERT_FALSE(outs[1].empty());
  const TokenOutput& last = outs[1].back();
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.reason, FinishReason::Error);
  EXPECT_NE(last.error.find("not finite"), std::string::npos) << last.error;
  EXPECT_LT(outs[1].size(), cs[1].expected.size());
  std::vector<int32_t> other;
  for (const TokenOutput& o : outs[2]) other.push_back(o.token.id);
  EXPECT_EQ(other, cs[2].expected);
  EXPECT_EQ(outs[2].back().reason, FinishReason::Length);
}

}  // namespace
}  // namespace lmx
