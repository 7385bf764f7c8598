#include "container/tool_calls.h"

#include <random>

#include <nlohmann/json.hpp>

#include "plugin/json_bounds.h"

namespace lmx::server {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistral = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string random_id(bool mistral) {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlnum) - 2);
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[pick(rng)];
  return id;
}

// The end (one past) of the JSON array or object starting at s[start], honouring strings;
// npos when it does not close.
size_t json_value_end(std::string_view s, size_t start) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = start; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<ordered_json> parse_json(std::string_view text) {
  if (json_bounds::nesting_depth(text) > json_bounds::kMaxDepth) return std::nullopt;
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string arguments_text(const ordered_json& args) {
  if (args.is_string()) return args.get<std::string>();  // already a JSON text
  return args.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// {"name": "...", "arguments" | "parameters": {...}} -> a call; nullopt when not that shape.
std::optional<ToolCall> call_of(const ordered_json& j, bool mistral) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  ToolCall c{random_id(mistral), name->get<std::string>(), "{}"};
  if (args != j.end()) {
    if (!args->is_object() && !args->is_string()) return std::nullopt;
    c.arguments = arguments_text(*args);
  }
  return c;
}

std::optional<std::vector<ToolCall>> parse_hermes(std::string_view text) {
  std::vector<ToolCall> calls;
  size_t pos = text.find(kHermesOpen);
  while (pos != std::string_view::npos) {
    size_t body = pos + kHermesOpen.size();
    size_t close = text.find(kHermesClose, body);
    // A call cut off by eos without its closing tag still counts when its JSON is whole.
    std::string_view inner = text.substr(body, close == std::string_view::npos ? text.npos
                                                                               : close - body);
    auto j = parse_json(trim(inner));
    if (!j) return std::nullopt;
    auto call = call_of(*j, false);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    if (close == std::string_view::npos) break;
    pos = text.find(kHermesOpen, close + kHermesClose.size());
  }
  return calls;
}

// Objects one after another, separated by ';' or whitespace, and nothing else.
std::optional<std::vector<ToolCall>> parse_objects(std::string_view s, bool mistral) {
  std::vector<ToolCall> calls;
  size_t i = 0;
  while (true) {
    while (i < s.size() && (is_space(s[i]) || s[i] == ';')) ++i;
    if (i == s.size()) break;
    if (s[i] != '{') return std::nullopt;
    size_t end = json_value_end(s, i);
    if (end == std::string_view::npos) return std::nullopt;
    auto j = parse_json(s.substr(i, end - i));
    if (!j) return std::nullopt;
    auto call = call_of(*j, mistral);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    i = end;
  }
  return calls;
}

std::optional<std::vector<ToolCall>> parse_llama3(std::string_view text) {
  std::string_view s = trim(text);
  if (s.substr(0, kPythonTag.size()) == kPythonTag) s.remove_prefix(kPythonTag.size());
  return parse_objects(s, false);
}

std::optional<std::vector<ToolCall>> parse_mistral(std::string_view after) {
  std::string_view s = trim(after);
  if (!s.empty() && s.front() == '[') {  // [{"name": ..., "arguments": ...}, ...]
    auto j = parse_json(s);
    if (!j || !j->is_array() || j->empty()) return std::nullopt;
    std::vector<ToolCall> calls;
    for (const auto& item : *j) {
      auto call = call_of(item, true);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    return calls;
  }
  // v11+ tokenizers: name[ARGS]{...}, repeated after further [TOOL_CALLS] markers.
  std::vector<ToolCall> calls;
  while (!s.empty()) {
    size_t args = s.find(kMistralArgs);
    if (args == std::string_view::npos) return std::nullopt;
    std::string name(trim(s.substr(0, args)));
    std::string_view rest = trim(s.substr(args + kMistralArgs.size()));
    size_t end = rest.empty() || rest.front() != '{' ? std::string_view::npos
                                                     : json_value_end(rest, 0);
    if (name.empty() || end == std::string_view::npos) return std::nullopt;
    auto j = parse_json(rest.substr(0, end));
    if (!j || !j->is_object()) return std::nullopt;
    calls.push_back(ToolCall{random_id(true), name, arguments_text(*j)});
    s = trim(rest.substr(end));
    if (s.substr(0, kMistral.size()) == kMistral) s = trim(s.substr(kMistral.size()));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// Where a marker starts in `text`, or where a tail of `text` could still grow into it.
size_t marker_start(std::string_view text, std::string_view marker) {
  size_t at = text.find(marker);
  if (at != std::string_view::npos) return at;
  for (size_t k = std::min(marker.size() - 1, text.size()); k > 0; --k) {
    if (text.substr(text.size() - k) == marker.substr(0, k)) return text.size() - k;
  }
  return text.size();
}

}  // namespace

std::optional<ToolCallFormat> tool_call_format(std::string_view name) {
  if (name.empty()) return ToolCallFormat::None;
  if (name == "hermes") return ToolCallFormat::Hermes;
  if (name == "llama3_json") return ToolCallFormat::Llama3Json;
  if (name == "mistral") return ToolCallFormat::Mistral;
  return std::nullopt;
}

ParsedOutput parse_tool_calls(ToolCallFormat format, std::string_view text) {
  ParsedOutput out{std::string(text), {}};
  std::optional<std::vector<ToolCall>> calls;
  std::string_view content;
  switch (format) {
    case ToolCallFormat::None:
      return out;
    case ToolCallFormat::Hermes: {
      size_t at = text.find(kHermesOpen);
      if (at == std::string_view::npos) return out;
      content = text.substr(0, at);
      calls = parse_hermes(text);
      break;
    }
    case ToolCallFormat::Llama3Json:
      calls = parse_llama3(text);
      break;
    case ToolCallFormat::Mistral: {
      size_t at = text.find(kMistral);
      if (at == std::string_view::npos) return out;
      content = text.substr(0, at);
      calls = parse_mistral(text.substr(at + kMistral.size()));
      break;
    }
  }
  if (!calls || calls->empty()) return out;  // malformed: the model's text as it is
  out.content = std::string(trim(content));
  out.calls = std::move(*calls);
  return out;
}

size_t tool_call_start(ToolCallFormat format, std::string_view text) {
  switch (format) {
    case ToolCallFormat::None:
      return text.size();
    case ToolCallFormat::Hermes:
      return marker_start(text, kHermesOpen);
    case ToolCallFormat::Mistral:
      return marker_start(text, kMistral);
    case ToolCallFormat::Llama3Json: {
      // A call is the whole output: hold from the start while it may be one.
      std::string_view s = text;
      while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
      if (s.empty() || s.front() == '{' || s.substr(0, kPythonTag.size()) == kPythonTag ||
          kPythonTag.substr(0, s.size()) == s)
        return 0;
      return text.size();
    }
  }
  return text.size();
}

}  // namespace lmx::server
