// Bounds on JSON that comes from outside (HTTP bodies, a host's request or overrides JSON):
// a nesting-depth check before parsing, and short quotes of values and keys for error messages.
// nlohmann::json parses and destroys without recursion, but dump(), copies and comparisons
// recurse once per level, so a value 60,000 levels deep overflows the stack unless refused first.
// Header-only: shared by the plugin and lmx-server (which must not link the engine).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace lmx::json_bounds {

// Deepest nesting of arrays and objects accepted (LMI/OpenAI requests need 4 or 5).
inline constexpr int kMaxDepth = 64;
// Longest quote of a bad value or key in an error message, in bytes (plus "...").
inline constexpr std::size_t kQuoteBytes = 64;

// The deepest nesting of [ and { in `text`, counting only brackets outside strings; stops
// counting once past `limit` (for valid JSON this is exactly the nesting depth).
inline int nesting_depth(std::string_view text, int limit = kMaxDepth) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

enum class ParseStatus { Ok, Malformed, TooDeep };

// Parses `text` unless it is nested deeper than `max_depth`; `out` is set only on Ok.
inline ParseStatus parse(std::string_view text, nlohmann::json& out, int max_depth = kMaxDepth) {
  if (nesting_depth(text, max_depth) > max_depth) return ParseStatus::TooDeep;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ParseStatus::Malformed;
  out = std::move(j);
  return ParseStatus::Ok;
}

inline std::string too_deep_message(int max_depth = kMaxDepth) {
  return "JSON nested deeper than " + std::to_string(max_depth) + " levels";
}

// At most `max_bytes` of `s`, cut on a UTF-8 character boundary, "..." appended when cut.
inline std::string clip(std::string_view s, std::size_t max_bytes = kQuoteBytes) {
  if (s.size() <= max_bytes) return std::string(s);
  std::size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
}

namespace detail {
// Writes JSON text of `v` until `out` holds `budget` bytes. Each level writes at least one byte
// before descending, so the recursion is at most `budget` deep whatever the depth of `v`.
inline void quote_into(const nlohmann::json& v, std::string& out, std::size_t budget) {
  auto dump = [](const nlohmann::json& x) {
    return x.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  if (out.size() >= budget) return;
  if (v.is_array() || v.is_object()) {
    out += v.is_array() ? '[' : '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() < budget; ++it) {
      if (!first) out += ',';
      first = false;
      if (v.is_object()) out += dump(nlohmann::json(clip(it.key(), budget))) + ':';
      quote_into(*it, out, budget);
    }
    out += v.is_array() ? ']' : '}';
  } else if (v.is_string()) {
    out += dump(nlohmann::json(clip(v.get_ref<const std::string&>(), budget)));
  } else {
    out += dump(v);
  }
}
}  // namespace detail

// A short JSON rendering of `v` for an error message: at most `max_bytes` (plus "...").
inline std::string quote(const nlohmann::json& v, std::size_t max_bytes = kQuoteBytes) {
  std::string out;
  detail::quote_into(v, out, max_bytes);
  if (out.size() <= max_bytes) return out;
  return clip(out, max_bytes);
}

}  // namespace lmx::json_bounds
