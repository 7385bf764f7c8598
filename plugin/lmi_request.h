// The LMI request schema -> engine requests. Throws lmx::RequestError naming the field
// ("inputs", "parameters.max_new_tokens", ...) for anything malformed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/api/engine.h"

namespace lmx::plugin {

struct LmiRequest {
  std::vector<std::string> inputs;  // one entry per input text
  bool batched = false;             // "inputs" was a list: answer with a list
  RequestParams params;             // shared by every input
  bool details = false;
  bool return_full_text = false;
  bool stream = false;
  bool add_special_tokens = true;  // false for a rendered chat template (plugin/chat_prompt.h)
};

// Parses the request body text (malformed JSON -> RequestError with field "body").
LmiRequest parse_lmi_request(const std::string& body);
LmiRequest parse_lmi_request(const nlohmann::json& body);

}  // namespace lmx::plugin
