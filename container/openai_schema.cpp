#include "container/openai_schema.h"

#include "container/lmi_schema.h"
#include "plugin/json_bounds.h"

namespace lmx::server {

using nlohmann::json;

namespace {

void require_number(const json& v, const char* field) {
  if (!v.is_number()) throw BadRequest(field, std::string(field) + ": must be a number");
}

}  // namespace

OpenAiRequest parse_openai_request(const std::string& body) {
  json j = parse_body(body);
  OpenAiRequest r;
  auto prompt = j.find("prompt");
  if (prompt == j.end() || prompt->is_null()) throw BadRequest("prompt", "prompt: is required");
  if (!prompt->is_string() && !prompt->is_array()) {
    throw BadRequest("prompt", "prompt: must be a string or a list of strings");
  }
  r.batched = prompt->is_array();
  if (r.batched && prompt->size() == 1) {
    r.lmi["inputs"] = (*prompt)[0];  // the common single-prompt-in-a-list form
  } else {
    r.lmi["inputs"] = *prompt;
  }
  json params = json::object();
  params["max_new_tokens"] = 16;  // OpenAI's default
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    if (key == "prompt") {
      continue;
    } else if (key == "model") {
      if (!v.is_string()) throw BadRequest("model", "model: must be a string");
      r.model = v.get<std::string>();
    } else if (key == "max_tokens") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1) {
        throw BadRequest("max_tokens", "max_tokens: must be a positive integer");
      }
      params["max_new_tokens"] = v;
    } else if (key == "temperature") {
      require_number(v, "temperature");
      double t = v.get<double>();
      if (t < 0 || t > 2) throw BadRequest("temperature", "temperature: must be in [0, 2]");
      if (t > 0) {
        params["temperature"] = t;
        params["do_sample"] = true;
      }
    } else if (key == "top_p") {
      require_number(v, "top_p");
      params["top_p"] = v;
    } else if (key == "top_k") {
      params["top_k"] = v;
    } else if (key == "seed") {
      params["seed"] = v;
    } else if (key == "stop") {
      params["stop_sequences"] = v.is_string() ? json::array({v}) : v;
    } else if (key == "repetition_penalty") {
      params["repetition_penalty"] = v;
    } else if (key == "frequency_penalty" || key == "presence_penalty") {
      require_number(v, key.c_str());
      if (v.get<double>() != 0) throw BadRequest(key, key + ": only 0 is supported");
    } else if (key == "n") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 16)
        throw BadRequest("n", "n: must be an integer from 1 to 16");
      r.n = v.get<int>();
    } else if (key == "best_of") {
      // Choosing the best of several needs their summed logprobs ranked: not done (yet).
      if (v != 1) throw BadRequest(key, key + ": only 1 is supported");
    } else if (key == "stream") {
      if (!v.is_boolean()) throw BadRequest("stream", "stream: must be true or false");
      r.stream = v.get<bool>();
    } else if (key == "echo") {
      if (!v.is_boolean()) throw BadRequest("echo", "echo: must be true or false");
      r.echo = v.get<bool>();
    } else if (key == "logprobs") {
      if (v.is_boolean() && !v.get<bool>()) continue;
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 5)
        throw BadRequest("logprobs", "logprobs: must be an integer from 0 to 5 or null");
      r.logprobs = true;
      r.top_logprobs = v.get<int>();
      if (r.top_logprobs > 0) params["top_n_tokens"] = r.top_logprobs;
    } else if (key == "stream_options") {
      if (!v.is_object()) throw BadRequest(key, "stream_options: must be an object");
      if (auto u = v.find("include_usage"); u != v.end() && !u->is_null()) {
        if (!u->is_boolean())
          throw BadRequest("stream_options.include_usage",
                           "stream_options.include_usage: must be true or false");
        r.include_usage = u->get<bool>();
      }
    } else if (key == "user" || key == "suffix" || key == "logit_bias") {
      // Accepted and ignored, as OpenAI-compatible servers commonly do.
    } else {
      std::string name = json_bounds::clip(key);
      throw BadRequest(name, name + ": unknown field");
    }
  }
  if (r.stream && r.lmi["inputs"].is_array()) {
    throw BadRequest("prompt", "prompt: streaming takes one prompt");
  }
  if (r.lmi["inputs"].is_array() && (r.n > 1 || r.logprobs)) {
    throw BadRequest(r.n > 1 ? "n" : "logprobs",
                     std::string(r.n > 1 ? "n" : "logprobs") +
                         ": takes one prompt per request, not a list");
  }
  r.lmi["parameters"] = params;
  return r;
}

std::string openai_finish_reason(const std::string& lmi_reason) {
  if (lmi_reason == "eos_token" || lmi_reason == "stop_sequence") return "stop";
  return lmi_reason;
}

json completion_response(const std::string& id, int64_t created, const std::string& model,
                         const json& finals, bool echo, const json& prompts) {
  json choices = json::array();
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t i = 0; i < finals.size(); ++i) {
    const json& f = finals[i];
    json d = f.value("details", json::object());
    std::string text = f.value("generated_text", "");
    if (echo) text = prompts[i].get<std::string>() + text;
    choices.push_back(json{{"text", text},
                           {"index", i},
                           {"logprobs", nullptr},
                           {"finish_reason", openai_finish_reason(d.value("finish_reason", ""))}});
    prompt_tokens += d.value("prompt_tokens", 0);
    completion_tokens += d.value("generated_tokens", 0);
  }
  return json{{"id", id},
              {"object", "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", choices},
              {"usage",
               {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}}}};
}

json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                      const std::string& text, const json& finish_reason) {
  return json{{"id", id},
              {"object", "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({json{{"text", text},
                                            {"index", 0},
                                            {"logprobs", nullptr},
                                            {"finish_reason", finish_reason}}})}};
}

}  // namespace lmx::server
