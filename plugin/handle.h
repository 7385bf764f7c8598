// What a live handle holds (the host's lmx_handle* is a token for it: plugin/handle_registry.h),
// and the helpers of the C functions that need the engine.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/api/engine.h"
#include "plugin/chat_prompt.h"
#include "plugin/stream_delivery.h"
#include "properties/serving_config.h"

namespace lmx::plugin {

struct Handle {
  std::unique_ptr<Engine> engine;
  std::string model_dir;
  std::shared_ptr<const ChatSetup> chat;    // the chat template(s), loaded once
  std::unique_ptr<StreamDelivery> streams;  // where stream callbacks run
  std::atomic<bool> shutting_down{false};

  // Calls in flight on this handle (HandleRegistry::Lease): lmx_destroy waits for them.
  void begin_call();
  void end_call();
  void wait_for_calls();

 private:
  std::mutex calls_mu_;
  std::condition_variable calls_cv_;
  int calls_ = 0;
};

// overrides_json (a JSON object of property keys to strings/numbers/booleans; null or "" for
// none) -> property overrides. Throws lmx::Error naming the bad key.
std::vector<properties::Override> parse_overrides(const char* overrides_json);

// The lmx_health document (see plugin.h).
nlohmann::json health_json(const Handle& handle);

}  // namespace lmx::plugin
