// OpenAI-style /v1/completions <-> the LMI request and the plugin's stream chunks.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace lmx::server {

struct OpenAiRequest {
  nlohmann::json lmi;  // the equivalent LMI request for the plugin
  bool stream = false;
  bool batched = false;  // "prompt" was a list
  bool echo = false;
  std::string model;
  int n = 1;                   // choices per prompt (one generation each, seed + i)
  bool logprobs = false;       // "logprobs": 0 -> the chosen tokens' logprobs
  int top_logprobs = 0;        // "logprobs": k > 0 -> and the k most likely at each position
  bool include_usage = false;  // stream_options.include_usage
};

// Throws BadRequest naming the OpenAI field ("prompt", "max_tokens", "n", ...).
OpenAiRequest parse_openai_request(const std::string& body);

// "length" stays, "eos_token"/"stop_sequence" -> "stop".
std::string openai_finish_reason(const std::string& lmi_reason);

// A text_completion object from the final chunks of each prompt.
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const nlohmann::json& finals, bool echo,
                                   const nlohmann::json& prompts);

// One SSE chunk object of a streamed completion (finish_reason null until the last).
nlohmann::json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                const std::string& text, const nlohmann::json& finish_reason);

}  // namespace lmx::server
