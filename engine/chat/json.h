// JSON in and out of template values: request data (messages, tools) becomes Values, and the
// tojson filter writes what transformers' override writes: Python's json.dumps(x,
// ensure_ascii=False, indent=..., separators=..., sort_keys=...), not jinja2's HTML-safe tojson.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/chat/value.h"

namespace lmx::chat {

Value from_json(const nlohmann::ordered_json& j);

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
  bool sort_keys = false;
};

// Throws lmx::Error for values JSON cannot hold (Undefined, macros, namespaces).
std::string to_json(const Value& v, const JsonOptions& options);

}  // namespace lmx::chat
