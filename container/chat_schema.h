// OpenAI /v1/chat/completions (and LMI's {"messages": [...], "parameters": {...}}) <-> the
// plugin's chat request and stream chunks. The plugin renders the messages with the model's chat
// template; this file only checks the OpenAI fields and builds OpenAI's JSON.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "container/tool_calls.h"

namespace lmx::server {

struct ChatRequest {
  // {"messages", "tools"?, "chat_template_kwargs"?, "parameters"} for lmx_predict_stream; key
  // order as the client sent it (a template may print a tool's schema).
  nlohmann::ordered_json plugin;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;  // alternatives per token (parameters.top_n_tokens), with logprobs
  bool tools = false;  // tools given and tool_choice is not "none": parse tool calls
  std::string model;
};

// The most choices one request may ask for.
inline constexpr int kMaxChoices = 16;

// Unknown fields are ignored; a field of the wrong type or an unsupported value is BadRequest
// naming the field. LMI-style "parameters" are passed on (the plugin checks them); OpenAI's
// top-level fields win over them.
ChatRequest parse_chat_request(const std::string& body);

// The plugin request of choice `index`: a given seed becomes seed + index, so that n sampled
// choices differ and each is reproducible.
std::string choice_request(const ChatRequest& r, int index);

// {"token", "logprob", "bytes", "top_logprobs": [...]} (OpenAI's logprobs.content entry) from the
// plugin's token chunk {"text", "log_prob", "top_tokens"?: [{"text", "log_prob"}, ...]}.
nlohmann::json logprob_entry(const nlohmann::json& token);

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);

// {"role": "assistant", "content", "tool_calls"?} of a finished choice.
nlohmann::json assistant_message(const ParsedOutput& out);

// [{"index", "id", "type": "function", "function": {"name", "arguments"}}] for a stream delta.
nlohmann::json tool_call_deltas(const ParsedOutput& out);

// One chat.completion.chunk with one choice.
nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model,
                          int index, nlohmann::json delta, nlohmann::json logprobs,
                          nlohmann::json finish_reason);

}  // namespace lmx::server
