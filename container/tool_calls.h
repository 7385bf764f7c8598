// Tool calls in generated text -> OpenAI tool_calls. One parser per format models are trained
// on; text that does not hold a well-formed call is plain content (never an error).
//   hermes       (Hermes, Qwen 2/2.5/3): <tool_call>{"name": ..., "arguments": {...}}</tool_call> ...
//   llama3_json  (Llama 3.1/3.2): [<|python_tag|>]{"name": ..., "parameters": {...}}[; {...}]
//   mistral      [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] or [TOOL_CALLS]name[ARGS]{...}
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmx::server {

enum class ToolCallFormat { None, Hermes, Llama3Json, Mistral };

// "hermes", "llama3_json", "mistral", "" (None); nullopt for any other name.
std::optional<ToolCallFormat> tool_call_format(std::string_view name);

struct ToolCall {
  std::string id;         // "call_..." (9 alphanumerics for mistral, which its template checks)
  std::string name;
  std::string arguments;  // a JSON text, as OpenAI sends it
};

struct ParsedOutput {
  std::string content;          // the text outside the calls (all of it when there are none)
  std::vector<ToolCall> calls;  // empty: no well-formed call
};

ParsedOutput parse_tool_calls(ToolCallFormat format, std::string_view text);

// Streaming: the offset from which `text` (generated so far) may be a tool call and must be held
// back until the end; text.size() when everything so far is plain content.
std::size_t tool_call_start(ToolCallFormat format, std::string_view text);

}  // namespace lmx::server
