// What an lmx_handle* points at, and the helpers of the C functions that need the engine.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/api/engine.h"
#include "plugin/chat_prompt.h"
#include "properties/serving_config.h"

struct lmx_handle {
  std::unique_ptr<lmx::Engine> engine;
  std::string model_dir;
  std::shared_ptr<const lmx::plugin::ChatSetup> chat;  // the chat template(s), loaded once
  std::atomic<bool> shutting_down{false};
};

namespace lmx::plugin {

// overrides_json (a JSON object of property keys to strings/numbers/booleans; null or "" for
// none) -> property overrides. Throws lmx::Error naming the bad key.
std::vector<properties::Override> parse_overrides(const char* overrides_json);

// The lmx_health document (see plugin.h).
nlohmann::json health_json(const lmx_handle& handle);

}  // namespace lmx::plugin
