#include "container/chat_schema.h"

#include <cmath>

#include "container/lmi_schema.h"
#include "plugin/json_bounds.h"

namespace lmx::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw BadRequest(field, field + ": " + why);
}

double number(const ordered_json& v, const std::string& field) {
  if (!v.is_number()) bad(field, "must be a number, got " + json_bounds::quote(json::parse(v.dump())));
  return v.get<double>();
}

int64_t integer(const ordered_json& v, const std::string& field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() && !v.is_number_unsigned())
    bad(field, "must be an integer, got " + json_bounds::quote(json::parse(v.dump())));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    bad(field, "must be at most " + std::to_string(hi));
  int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    bad(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

bool boolean(const ordered_json& v, const std::string& field) {
  if (!v.is_boolean()) bad(field, "must be true or false");
  return v.get<bool>();
}

void check_tools(const ordered_json& tools) {
  if (!tools.is_array()) bad("tools", "must be a list");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string field = "tools[" + std::to_string(i) + "]";
    const ordered_json& t = tools[i];
    if (!t.is_object()) bad(field, "must be an object {\"type\": \"function\", \"function\": {...}}");
    if (t.value("type", "function") != "function") bad(field + ".type", "must be \"function\"");
    auto f = t.find("function");
    if (f == t.end() || !f->is_object()) bad(field + ".function", "must be an object");
    auto name = f->find("name");
    if (name == f->end() || !name->is_string() || name->get<std::string>().empty())
      bad(field + ".function.name", "must be a non-empty string");
    if (auto p = f->find("parameters"); p != f->end() && !p->is_object() && !p->is_null())
      bad(field + ".function.parameters", "must be a JSON Schema object");
  }
}

// tool_choice: "none" -> the tools are neither rendered nor parsed; "auto" -> both; "required" or
// a named function -> both, and the plugin holds the output to one call by constrained decoding
// (plugin/tool_choice.h, which also checks the name against the tools: a 400 there).
bool tools_wanted(const ordered_json& v, ordered_json& plugin) {
  if (v == "none") return false;
  if (v == "auto") return true;
  if (v == "required" || v.is_object()) {
    plugin["tool_choice"] = v;
    return true;
  }
  bad("tool_choice", "must be \"none\", \"auto\", \"required\" or an object");
}

}  // namespace

ChatRequest parse_chat_request(const std::string& body) {
  if (json_bounds::nesting_depth(body) > json_bounds::kMaxDepth)
    bad("body", json_bounds::too_deep_message());
  ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad("body", "malformed JSON");
  if (!j.is_object()) bad("body", "must be a JSON object");
  auto messages = j.find("messages");
  if (messages == j.end() || messages->is_null()) bad("messages", "is required");
  if (!messages->is_array() || messages->empty()) bad("messages", "must be a non-empty list");

  ChatRequest r;
  r.plugin["messages"] = *messages;
  ordered_json params = ordered_json::object();
  if (auto p = j.find("parameters"); p != j.end() && !p->is_null()) {
    if (!p->is_object()) bad("parameters", "must be a JSON object");
    params = *p;
  }
  ordered_json tools;
  bool tool_choice = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const ordered_json& v = it.value();
    if (v.is_null()) continue;
    if (key == "model") {
      if (!v.is_string()) bad(key, "must be a string");
      r.model = v.get<std::string>();
    } else if (key == "max_tokens" || key == "max_completion_tokens") {
      params["max_new_tokens"] = integer(v, key, 1, INT32_MAX);
    } else if (key == "temperature") {
      double t = number(v, key);
      if (t < 0 || t > 2) bad(key, "must be in [0, 2]");
      if (t > 0) {  // 0 is greedy, as for /v1/completions
        params["temperature"] = t;
        params["do_sample"] = true;
      }
    } else if (key == "top_p") {
      double p = number(v, key);
      if (!(p > 0 && p <= 1)) bad(key, "must be in (0, 1]");
      params["top_p"] = p;
    } else if (key == "top_k") {
      params["top_k"] = integer(v, key, 0, INT32_MAX);
    } else if (key == "seed") {
      params["seed"] = integer(v, key, 0, INT32_MAX);
    } else if (key == "stop") {
      if (!v.is_string() && !v.is_array()) bad(key, "must be a string or a list of strings");
      params["stop_sequences"] = v.is_string() ? ordered_json::array({v}) : v;
    } else if (key == "repetition_penalty") {
      params["repetition_penalty"] = number(v, key);
    } else if (key == "ignore_eos") {
      params["ignore_eos"] = boolean(v, key);
    } else if (key == "frequency_penalty" || key == "presence_penalty") {
      if (number(v, key) != 0) bad(key, "only 0 is supported (use repetition_penalty)");
    } else if (key == "logit_bias") {
      if (!v.is_object()) bad(key, "must be an object");
      if (!v.empty()) bad(key, "is not supported");
    } else if (key == "response_format") {
      if (!v.is_object() || v.value("type", "") != "text")
        bad(key, "only {\"type\": \"text\"} is supported (no constrained decoding)");
    } else if (key == "n") {
      r.n = static_cast<int>(integer(v, key, 1, kMaxChoices));
    } else if (key == "logprobs") {
      r.logprobs = boolean(v, key);
    } else if (key == "top_logprobs") {
      r.top_logprobs = static_cast<int>(integer(v, key, 0, 20));
    } else if (key == "stream") {
      r.stream = boolean(v, key);
    } else if (key == "stream_options") {
      if (!v.is_object()) bad(key, "must be an object");
      if (auto u = v.find("include_usage"); u != v.end() && !u->is_null())
        r.include_usage = boolean(*u, "stream_options.include_usage");
    } else if (key == "tools") {
      check_tools(v);
      tools = v;
    } else if (key == "tool_choice") {
      tool_choice = tools_wanted(v, r.plugin);
    } else if (key == "chat_template_kwargs") {
      if (!v.is_object()) bad(key, "must be a JSON object");
      r.plugin[key] = v;
    } else if (key == "documents") {
      if (!v.is_array()) bad(key, "must be a list");
      r.plugin[key] = v;
    }
    // Anything else (user, metadata, store, parallel_tool_calls, ...) is ignored, as OpenAI's
    // own server ignores what it does not know.
  }
  if (r.top_logprobs > 0) {
    if (!r.logprobs) bad("top_logprobs", "needs \"logprobs\": true");
    params["top_n_tokens"] = r.top_logprobs;
  }
  if (tool_choice && tools.is_array() && !tools.empty()) {
    r.plugin["tools"] = tools;
    r.tools = true;
  }
  r.plugin["parameters"] = std::move(params);
  return r;
}

std::string choice_request(const ChatRequest& r, int index) {
  ordered_json req = r.plugin;
  if (index > 0) {
    ordered_json& params = req["parameters"];
    if (auto s = params.find("seed"); s != params.end() && s->is_number_integer())
      *s = s->get<int64_t>() + index;
  }
  return req.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

namespace {

json token_logprob(const json& t) {
  const std::string text = t.value("text", "");
  const double lp = t.value("log_prob", -9999.0);
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(int(c));
  return json{{"token", text}, {"logprob", std::isfinite(lp) ? lp : -9999.0}, {"bytes", bytes}};
}

}  // namespace

json logprob_entry(const json& token) {
  json entry = token_logprob(token);
  json top = json::array();
  if (auto alts = token.find("top_tokens"); alts != token.end() && alts->is_array())
    for (const json& a : *alts) top.push_back(token_logprob(a));
  entry["top_logprobs"] = std::move(top);
  return entry;
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}};
}

json assistant_message(const ParsedOutput& out) {
  json m{{"role", "assistant"}};
  if (out.calls.empty()) {
    m["content"] = out.content;
    return m;
  }
  m["content"] = out.content.empty() ? json(nullptr) : json(out.content);
  json calls = json::array();
  for (const auto& c : out.calls) {
    calls.push_back(json{{"id", c.id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  m["tool_calls"] = std::move(calls);
  return m;
}

json tool_call_deltas(const ParsedOutput& out) {
  json calls = assistant_message(out)["tool_calls"];
  for (size_t i = 0; i < calls.size(); ++i) calls[i]["index"] = i;
  return calls;
}

json chat_chunk(const std::string& id, int64_t created, const std::string& model, int index,
                json delta, json logprobs, json finish_reason) {
  return json{{"id", id},
              {"object", "chat.completion.chunk"},
              {"created", created},
              {"model", model},
              {"choices", json::array({json{{"index", index},
                                            {"delta", std::move(delta)},
                                            {"logprobs", std::move(logprobs)},
                                            {"finish_reason", std::move(finish_reason)}}})}};
}

}  // namespace lmx::server
