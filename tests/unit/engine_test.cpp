// The engine API end to end on the CPU backend with the real TinyStories-656K model and its
// tokenizer: streaming updates, concurrency, cancellation, limits and shutdown.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "engine/api/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "properties/serving_config.h"

namespace lmx {
namespace {

const std::filesystem::path kModel = std::filesystem::path(LMX_SHARED_MODELS_DIR) / "tinystories-656k";

properties::ServingConfig config(std::map<std::string, std::string> env = {}) {
  return properties::load_serving_config(kModel, properties::Environment::from_map(std::move(env), 0),
                                         properties::EngineCapabilities::this_build());
}

// Collects one request's updates; wait() blocks until the final one.
struct Collector {
  std::mutex m;
  std::condition_variable cv;
  std::vector<RequestUpdate> updates;
  bool done = false;

  UpdateCallback callback() {
    return [this](const RequestUpdate& u) {
      std::lock_guard lock(m);
      updates.push_back(u);
      done = u.finished;
      cv.notify_all();
    };
  }
  const RequestUpdate& wait() {
    std::unique_lock lock(m);
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; });
    EXPECT_TRUE(done);
    return updates.back();
  }
  std::string text() {
    std::string t;
    for (const auto& u : updates) t += u.text_delta;
    return t;
  }
  std::vector<int32_t> ids() {
    std::vector<int32_t> out;
    for (const auto& u : updates)
      for (const auto& t : u.tokens) out.push_back(t.id);
    return out;
  }
};

EngineRequest greedy(std::string prompt, int max_new) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.params.max_new_tokens = max_new;
  return r;
}

// Every engine test runs on one engine, on two replicas (option.max_replicas) and on the model
// split over two tensor-parallel ranks.
using Layout = std::map<std::string, std::string>;

class EngineTest : public ::testing::TestWithParam<Layout> {
 protected:
  static Layout env() {
    Layout e = GetParam();
    e["OPTION_MAX_ROLLING_BATCH_SIZE"] = "8";
    return e;
  }
  std::unique_ptr<Engine> engine_ = Engine::create(config(env()));
};

INSTANTIATE_TEST_SUITE_P(Layouts, EngineTest,
                         ::testing::Values(Layout{}, Layout{{"OPTION_MAX_REPLICAS", "2"}},
                                           Layout{{"OPTION_TENSOR_PARALLEL_DEGREE", "2"}}),
                         [](const auto& param_info) -> std::string {
                           if (param_info.param.empty()) return "one_engine";
                           return param_info.param.begin()->first == "OPTION_MAX_REPLICAS"
                                      ? "two_replicas"
                                      : "two_tensor_parallel_ranks";
                         });

// Requests spread over the replicas (the least loaded takes the next one); ids are the set's,
// unique, and stats() covers both replicas.
TEST(EngineReplicas, RequestsSpreadOverReplicasWithTheirOwnIds) {
  auto engine = Engine::create(config({{"OPTION_MAX_REPLICAS", "2"}}));
  const nlohmann::json before = engine->stats();
  ASSERT_EQ(before["replica_count"], 2);
  ASSERT_EQ(before["replicas"].size(), 2u);
  EXPECT_EQ(before["tensor_parallel"]["degree"], 1);
  std::vector<std::unique_ptr<Collector>> cs;
  std::set<uint64_t> ids;
  for (int i = 0; i < 6; ++i) {
    cs.push_back(std::make_unique<Collector>());
    ids.insert(engine->enqueue(greedy("Once upon a time", 20), cs.back()->callback()));
  }
  for (auto& c : cs) {
    c->wait();
    EXPECT_TRUE(ids.count(c->updates.back().id)) << "an update carried a replica's own id";
    EXPECT_EQ(c->ids(), cs[0]->ids());
  }
  EXPECT_EQ(ids.size(), 6u);
  const nlohmann::json after = engine->stats();
  EXPECT_EQ(after["requests_total"], 6);
  for (const auto& r : after["replicas"]) EXPECT_GE(r["requests_total"].get<int>(), 2) << after.dump();
}

TEST_P(EngineTest, StreamsTextThatEqualsTheDecodeOfItsTokens) {
  Collector c;
  engine_->enqueue(greedy("Once upon a time", 40), c.callback());
  const RequestUpdate& last = c.wait();
  EXPECT_EQ(last.generated_tokens, int(c.ids().size()));
  EXPECT_GT(last.prompt_tokens, 1);
  const auto ids = c.ids();
  EXPECT_EQ(c.text(), engine_->tokenizer().decode(ids, /*skip_special_tokens=*/true));
  EXPECT_FALSE(c.text().empty());
  EXPECT_TRUE(last.finish_status == FinishStatus::Length || last.finish_status == FinishStatus::EosToken);
}

// top_logprobs: each token comes with its draw's k most likely tokens, most likely first, with
// log-probabilities of the same distribution as the token's own: greedy chose the first, the
// greedy text is unchanged, and the values fall.
TEST_P(EngineTest, TopLogprobsListTheDrawsMostLikelyTokens) {
  Collector plain, with_top;
  engine_->enqueue(greedy("Once upon a time", 12), plain.callback());
  EngineRequest r = greedy("Once upon a time", 12);
  r.params.top_logprobs = 4;
  engine_->enqueue(std::move(r), with_top.callback());
  plain.wait();
  with_top.wait();
  EXPECT_EQ(with_top.ids(), plain.ids());
  int tokens = 0;
  for (const RequestUpdate& u : with_top.updates)
    for (const GeneratedToken& t : u.tokens) {
      ++tokens;
      ASSERT_EQ(t.top.size(), 4u);
      EXPECT_EQ(t.top[0].id, t.id);
      EXPECT_NEAR(t.top[0].logprob, t.logprob, 1e-4);
      for (size_t i = 1; i < t.top.size(); ++i) {
        EXPECT_LE(t.top[i].logprob, t.top[i - 1].logprob);
        EXPECT_NE(t.top[i].id, t.top[0].id);
      }
      const int32_t id = t.top[1].id;
      EXPECT_EQ(t.top[1].text, engine_->tokenizer().decode(std::span<const int32_t>(&id, 1)));
    }
  EXPECT_EQ(tokens, 12);
  for (const RequestUpdate& u : plain.updates)
    for (const GeneratedToken& t : u.tokens) EXPECT_TRUE(t.top.empty());
  Collector bad;
  EngineRequest too_many = greedy("Once upon a time", 4);
  too_many.params.top_logprobs = 21;
  try {
    engine_->enqueue(std::move(too_many), bad.callback());
    ADD_FAILURE() << "top_logprobs 21 accepted";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.field(), "parameters.top_n_tokens") << e.what();
  }
}

TEST_P(EngineTest, ConcurrentRequestsMatchTheSameRequestAlone) {
  Collector alone;
  engine_->enqueue(greedy("The little dog", 30), alone.callback());
  alone.wait();
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<std::thread> threads;
  for (int i = 0; i < 12; ++i) cs.push_back(std::make_unique<Collector>());
  for (int i = 0; i < 12; ++i)
    threads.emplace_back([&, i] {
      engine_->enqueue(greedy(i % 2 ? "The little dog" : "Lily and Ben went", 30), cs[i]->callback());
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 12; ++i) {
    cs[i]->wait();
    if (i % 2) {
      EXPECT_EQ(cs[i]->ids(), alone.ids()) << i;
    }
  }
}

TEST_P(EngineTest, StopSequenceEndsTheRequestWithoutEmittingIt) {
  Collector full;
  engine_->enqueue(greedy("Once upon a time", 40), full.callback());
  full.wait();
  const std::string text = full.text();
  ASSERT_GT(text.size(), 20u);
  const std::string stop = text.substr(10, 5);
  Collector c;
  EngineRequest r = greedy("Once upon a time", 40);
  r.params.stop_sequences = {stop};
  engine_->enqueue(r, c.callback());
  EXPECT_EQ(c.wait().finish_status, FinishStatus::StopSequence);
  EXPECT_EQ(c.text(), text.substr(0, text.find(stop)));
}

TEST_P(EngineTest, CancelEndsWithCancelled) {
  Collector c;
  const uint64_t id = engine_->enqueue(greedy("Once upon a time", 400), c.callback());
  EXPECT_TRUE(engine_->cancel(id));
  const RequestUpdate& last = c.wait();
  EXPECT_EQ(last.finish_status, FinishStatus::Cancelled);
  EXPECT_LT(last.generated_tokens, 400);
  EXPECT_FALSE(engine_->cancel(id));
  EXPECT_FALSE(engine_->cancel(987654));
}

TEST_P(EngineTest, MaxTokensErrorNamesBothNumbers) {
  try {
    engine_->enqueue(greedy("Once upon a time", 2000), [](const RequestUpdate&) {});
    FAIL();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.field(), "parameters.max_new_tokens");
    EXPECT_NE(std::string(e.what()).find("2000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_tokens (1024)"), std::string::npos) << e.what();
  }
}

TEST_P(EngineTest, BadSamplingParameterNamesTheField) {
  EngineRequest r = greedy("hi", 5);
  r.params.sampling = {.greedy = false, .top_p = 2.0f};
  try {
    engine_->enqueue(r, [](const RequestUpdate&) {});
    FAIL();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.field(), "parameters.top_p");
  }
}

// option.rolling_batch=disable is LMI's dynamic batching: batches of at most batch_size, each
// run to its end before the next, gathered for up to max_batch_delay ms.
TEST(EngineDynamicBatching, BatchesOfBatchSizeRunOneAfterAnother) {
  auto engine = Engine::create(config({{"OPTION_ROLLING_BATCH", "disable"},
                                       {"SERVING_BATCH_SIZE", "2"},
                                       {"SERVING_MAX_BATCH_DELAY", "50"}}));
  Collector alone;
  engine->enqueue(greedy("Once upon a time", 12), alone.callback());
  alone.wait();
  std::vector<std::unique_ptr<Collector>> cs;
  for (int i = 0; i < 5; ++i) {
    cs.push_back(std::make_unique<Collector>());
    engine->enqueue(greedy("Once upon a time", 12), cs.back()->callback());
  }
  int most_running = 0;
  for (int polls = 0; polls < 4000; ++polls) {
    const nlohmann::json st = engine->stats();
    most_running = std::max(most_running, st["running"].get<int>());
    if (st["running"] == 0 && st["waiting"] == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto& c : cs) {
    c->wait();
    EXPECT_EQ(c->ids(), alone.ids());
  }
  EXPECT_EQ(most_running, 2) << "batch_size 2 bounds the batch (and a full batch starts at once)";

  // One request alone waits max_batch_delay for company, then runs.
  auto slow = Engine::create(config({{"OPTION_ROLLING_BATCH", "disable"},
                                     {"SERVING_BATCH_SIZE", "4"},
                                     {"SERVING_MAX_BATCH_DELAY", "400"}}));
  Collector one;
  const auto start = std::chrono::steady_clock::now();
  slow->enqueue(greedy("Once upon a time", 2), one.callback());
  one.wait();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(400));
}

// A request cancelled while it waits for its batch ends Cancelled and never runs.
TEST(EngineDynamicBatching, CancelWhileHeldForTheBatch) {
  auto engine = Engine::create(config({{"OPTION_ROLLING_BATCH", "disable"},
                                       {"SERVING_BATCH_SIZE", "8"},
                                       {"SERVING_MAX_BATCH_DELAY", "5000"}}));
  Collector c;
  const uint64_t id = engine->enqueue(greedy("Once upon a time", 5), c.callback());
  EXPECT_TRUE(engine->cancel(id));
  const RequestUpdate& last = c.wait();
  EXPECT_EQ(last.finish_status, FinishStatus::Cancelled);
  EXPECT_EQ(last.generated_tokens, 0);
}

// Sizes computed from settings use 64-bit arithmetic: max_tokens at INT_MAX was "-134217727
// blocks (-2097152.0 MiB)"; now an error naming the numbers.
TEST(EngineLimits, HugeMaxTokensIsRefusedWithItsNumbers) {
  try {
    Engine::create(config({{"OPTION_MAX_TOKENS", "2147483647"}}));
    ADD_FAILURE() << "an engine was made";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("option.max_tokens 2147483647"), std::string::npos) << what;
    EXPECT_EQ(what.find("-134217727"), std::string::npos) << what;
  }
}

TEST(EngineQueue, FullQueueIsRejectedAndShutdownDrains) {
  auto engine = Engine::create(config({{"SERVING_JOB_QUEUE_SIZE", "2"},
                                       {"OPTION_MAX_ROLLING_BATCH_SIZE", "1"}}));
  std::vector<std::unique_ptr<Collector>> cs;
  int rejected = 0;
  for (int i = 0; i < 8; ++i) {
    cs.push_back(std::make_unique<Collector>());
    try {
      engine->enqueue(greedy("Once upon a time", 50), cs.back()->callback());
    } catch (const QueueFullError&) {
      ++rejected;
      cs.pop_back();
    }
  }
  EXPECT_GT(rejected, 0);
  engine->shutdown();
  for (auto& c : cs) EXPECT_TRUE(c->done) << "shutdown must finish every accepted request";
  EXPECT_THROW(engine->enqueue(greedy("x", 1), [](const RequestUpdate&) {}), EngineUnavailableError);
}

// option.request_timeout: a request past its deadline (waiting included) ends within a step with
// an error naming the key, whether it runs or waits; its KV blocks are freed, and requests that
// finish in time are untouched.
TEST(EngineTimeout, ExpiredRequestsEndWithAnErrorNamingTheKeyAndFreeTheirBlocks) {
  using Clock = std::chrono::steady_clock;
  auto engine = Engine::create(config({{"OPTION_REQUEST_TIMEOUT", "1"},
                                       {"OPTION_MAX_ROLLING_BATCH_SIZE", "32"},
                                       {"SERVING_JOB_QUEUE_SIZE", "1000"}}));
  constexpr int kRequests = 160, kTokens = 480;  // far more work than 1 s on any CPU
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<Clock::time_point> sent;
  for (int i = 0; i < kRequests; ++i) {
    cs.push_back(std::make_unique<Collector>());
    EngineRequest r = greedy("Once upon a time " + std::to_string(i), kTokens);
    r.params.ignore_eos = true;
    sent.push_back(Clock::now());
    engine->enqueue(std::move(r), cs.back()->callback());
  }
  int completed = 0, timed_out = 0, timed_out_running = 0;
  for (int i = 0; i < kRequests; ++i) {
    const RequestUpdate last = cs[size_t(i)]->wait();
    const double elapsed = std::chrono::duration<double>(Clock::now() - sent[size_t(i)]).count();
    if (last.finish_status == FinishStatus::Length) {
      EXPECT_EQ(last.generated_tokens, kTokens);
      ++completed;
      continue;
    }
    ASSERT_EQ(last.finish_status, FinishStatus::Error) << "request " << i << ": " << last.error;
    EXPECT_NE(last.error.find("the request timed out: it ran past option.request_timeout=1 s"),
              std::string::npos) << last.error;
    EXPECT_LT(elapsed, 3.0) << "request " << i << " ended " << elapsed << " s after it was sent";
    EXPECT_LT(last.generated_tokens, kTokens);
    ++timed_out;
    if (last.generated_tokens > 0) ++timed_out_running;
  }
  EXPECT_GT(timed_out, 0);
  EXPECT_GT(timed_out_running, 0) << "some request should have been stopped while running";
  EXPECT_EQ(completed + timed_out, kRequests);
  const auto stats = engine->stats();
  EXPECT_EQ(stats["timed_out_total"], timed_out);
  EXPECT_EQ(stats["kv_blocks_used"], 0) << stats.dump();
  EXPECT_EQ(stats["running"], 0);
  EXPECT_EQ(stats["waiting"], 0);
  // The engine still serves: a short request now is well within its deadline.
  Collector c;
  engine->enqueue(greedy("Once upon a time", 8), c.callback());
  EXPECT_EQ(c.wait().finish_status, FinishStatus::Length);
}

// Under dynamic batching (rolling_batch=disable) a request held for its batch expires too.
TEST(EngineTimeout, ExpiresWhileHeldForTheBatch) {
  auto engine = Engine::create(config({{"OPTION_REQUEST_TIMEOUT", "1"},
                                       {"OPTION_ROLLING_BATCH", "disable"},
                                       {"SERVING_BATCH_SIZE", "4"},
                                       {"SERVING_MAX_BATCH_DELAY", "5000"}}));
  const auto start = std::chrono::steady_clock::now();
  Collector c;
  engine->enqueue(greedy("Once upon a time", 8), c.callback());  // waits for 3 more, 5 s at most
  const RequestUpdate last = c.wait();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(last.finish_status, FinishStatus::Error);
  EXPECT_NE(last.error.find("option.request_timeout=1 s"), std::string::npos) << last.error;
  EXPECT_EQ(last.generated_tokens, 0);
  EXPECT_GT(elapsed, 0.9);
  EXPECT_LT(elapsed, 3.0);
  EXPECT_EQ(engine->stats()["timed_out_total"], 1);
}

}  // namespace
}  // namespace lmx
