// tool_choice "required" or {"type": "function", "function": {"name": X}} -> the grammar the
// constrained decoder holds the output to: exactly one tool call, written in the model's
// tool-call format so that the server's parser (container/tool_calls.h) reads it back:
//   hermes       <tool_call>\n{"name": "X", "arguments": ARGS}\n</tool_call>
//   llama3_json  {"name": "X", "parameters": ARGS}
//   mistral      [TOOL_CALLS][{"name": "X", "arguments": ARGS}]
// ARGS is an object per the function's `parameters` (the subset of engine/generate/
// json_schema.h; no parameters: any object). "required" is one call of any of the tools: the
// name comes first and selects its own arguments' schema (JsonGrammar::one_of); with one tool it
// is the same grammar as that tool named.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/generate/json_recognizer.h"

namespace lmx::plugin {

// nullptr for "auto", "none" or null (no constraint). Throws RequestError naming the field:
// tool_choice without tools, a name not among the tools, a model without a tool-call format
// (`parser` is ChatSetup::tool_call_parser), a malformed tool_choice, a schema it cannot honour.
std::shared_ptr<const JsonGrammar> tool_choice_grammar(const std::string& parser,
                                                       const nlohmann::ordered_json& tools,
                                                       const nlohmann::ordered_json& tool_choice);

}  // namespace lmx::plugin
