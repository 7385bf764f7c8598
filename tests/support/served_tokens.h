// Test support: greedy tokens of one request served through the engine API (the path of
// lmx-server and the plugin), for tests that compare what a served model generates with what the
// backend or another configuration does.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/api/engine.h"
#include "properties/serving_config.h"

namespace lmx::testing {

// The tokens of `prompt` + max_new_tokens greedy tokens (EOS ignored) served from `model_dir` with
// the environment `env` (OPTION_* variables, as a container gets them); the engine's stats into
// *stats when asked. An error update or a request that does not finish in 120 s fails the test.
inline std::vector<int32_t> served_greedy_tokens(const std::filesystem::path& model_dir,
                                                 std::map<std::string, std::string> env,
                                                 const std::string& prompt, int max_new_tokens,
                                                 nlohmann::json* stats = nullptr) {
  auto engine = Engine::create(properties::load_serving_config(
      model_dir, properties::Environment::from_map(std::move(env), 0),
      properties::EngineCapabilities::this_build()));
  if (stats) *stats = engine->stats();
  std::mutex mu;
  std::vector<int32_t> ids;
  std::promise<void> done;
  EngineRequest r;
  r.prompt = prompt;
  r.params.max_new_tokens = max_new_tokens;
  r.params.ignore_eos = true;
  engine->enqueue(std::move(r), [&](const RequestUpdate& u) {
    std::lock_guard lock(mu);
    for (const GeneratedToken& t : u.tokens) ids.push_back(t.id);
    EXPECT_TRUE(u.error.empty()) << u.error;
    if (u.finished) done.set_value();
  });
  EXPECT_EQ(done.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
  std::lock_guard lock(mu);
  return ids;
}

}  // namespace lmx::testing
