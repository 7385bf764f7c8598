#include "container/chat_routes.h"

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "container/chat_schema.h"
#include "container/generate.h"
#include "container/http_session.h"
#include "container/lmi_schema.h"
#include "container/openai_schema.h"
#include "container/streaming.h"
#include "plugin/json_bounds.h"

namespace lmx::server {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

struct Choice {
  std::string text;        // generated so far
  size_t sent = 0;         // bytes of text streamed as content
  json logprobs = json::array();  // logprob_entry per token
  std::vector<size_t> offsets;    // where each token starts in the text
  size_t logprobs_sent = 0;
  json final_chunk;        // null until finished
};

// The state of one request's n choices and how it is answered: a chat completion, or (for
// /v1/completions with n or logprobs) a text completion.
struct ChatRun {
  ChatRequest req;
  std::vector<std::string> requests;  // the plugin request of each choice
  bool completion = false;            // text_completion objects instead of chat ones
  std::string echo;                   // completion: the prompt, when echoed
  ToolCallFormat format = ToolCallFormat::None;
  std::string id;
  int64_t created = 0;
  std::string model;
  Clock::time_point started;
  std::vector<Choice> choices;
  std::vector<std::weak_ptr<StreamJob>> jobs;
  int pending = 0;
  bool begun = false;     // first chunk seen
  bool answered = false;  // the response (or its failure) is out

  std::string sse(const json& j) const { return "data: " + dump_json(j) + "\n\n"; }

  // Chat: {"content": [entries]}; completions: the legacy {"tokens", "token_logprobs",
  // "top_logprobs" ({token: logprob} of the alternatives at each position; null with logprobs 0),
  // "text_offset"}.
  json logprobs_json(const Choice& c, size_t from) const {
    if (!req.logprobs) return nullptr;
    json content = json::array(), tokens = json::array(), values = json::array(),
         tops = json::array(), offsets = json::array();
    for (size_t k = from; k < c.logprobs.size(); ++k) {
      const json& e = c.logprobs[k];
      content.push_back(e);
      tokens.push_back(e["token"]);
      values.push_back(e["logprob"]);
      json top = json::object();
      for (const json& a : e["top_logprobs"]) top[a["token"].get<std::string>()] = a["logprob"];
      tops.push_back(std::move(top));
      offsets.push_back(echo.size() + c.offsets[k]);
    }
    if (!completion) return json{{"content", std::move(content)}};
    return json{{"tokens", tokens}, {"token_logprobs", values},
                {"top_logprobs", req.top_logprobs > 0 ? std::move(tops) : json(nullptr)},
                {"text_offset", offsets}};
  }

  json logprobs_since(Choice& c) {
    json out = logprobs_json(c, c.logprobs_sent);
    c.logprobs_sent = c.logprobs.size();
    return out;
  }

  // One stream chunk of choice `index`: new text (none: an empty delta), logprobs, finish.
  json chunk(int index, const std::string& text, json logprobs, json finish_reason) const {
    if (!completion) {
      json delta = text.empty() ? json::object() : json{{"content", text}};
      return chat_chunk(id, created, model, index, delta, std::move(logprobs),
                        std::move(finish_reason));
    }
    json c = completion_chunk(id, created, model, text, finish_reason);
    c["choices"][0]["index"] = index;
    c["choices"][0]["logprobs"] = std::move(logprobs);
    return c;
  }

  ParsedOutput parsed(const Choice& c) const {
    return req.tools ? parse_tool_calls(format, c.text) : ParsedOutput{c.text, {}};
  }

  static std::string reason(const json& final_chunk, const ParsedOutput& out) {
    if (!out.calls.empty()) return "tool_calls";
    json d = final_chunk.value("details", json::object());
    return openai_finish_reason(d.value("finish_reason", ""));
  }

  void record(Choice& c, const json& chunk) {
    auto t = chunk.find("token");
    if (t == chunk.end() || !t->is_object()) return;
    std::string text = t->value("text", "");
    if (req.logprobs && (*t)["id"].is_number() && (*t)["log_prob"].is_number()) {
      c.logprobs.push_back(logprob_entry(*t));
      c.offsets.push_back(c.text.size());
    }
    c.text += text;
  }

  // Streams the choice's new content, holding back what may be a tool call.
  void stream_content(HttpSession& s, int index, Choice& c) {
    size_t upto = req.tools ? tool_call_start(format, c.text) : c.text.size();
    if (upto <= c.sent) return;
    std::string text = c.text.substr(c.sent, upto - c.sent);
    c.sent = upto;
    s.stream_write(sse(chunk(index, text, logprobs_since(c), nullptr)));
  }

  void stream_final(HttpSession& s, int index, Choice& c) {
    ParsedOutput out = parsed(c);
    if (!out.calls.empty()) {
      json delta{{"tool_calls", tool_call_deltas(out)}};
      s.stream_write(sse(chat_chunk(id, created, model, index, delta, logprobs_since(c), nullptr)));
    } else if (c.sent < c.text.size()) {
      std::string text = c.text.substr(c.sent);
      c.sent = c.text.size();
      s.stream_write(sse(chunk(index, text, logprobs_since(c), nullptr)));
    }
    json last = chunk(index, "", nullptr, reason(c.final_chunk, out));
    if (c.final_chunk.contains("error")) last["error"] = c.final_chunk["error"];
    if (req.include_usage) last["usage"] = nullptr;
    s.stream_write(sse(last));
  }

  json usage() const {
    int64_t prompt = 0, generated = 0;
    for (const auto& c : choices) {
      json d = c.final_chunk.value("details", json::object());
      prompt = std::max<int64_t>(prompt, d.value("prompt_tokens", 0));  // the same prompt n times
      generated += d.value("generated_tokens", 0);
    }
    return usage_json(prompt, generated);
  }

  std::string response() const {
    json out = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      const Choice& c = choices[i];
      ParsedOutput p = parsed(c);
      json choice{{"index", i},
                  {"logprobs", logprobs_json(c, 0)},
                  {"finish_reason", reason(c.final_chunk, p)}};
      if (completion) {
        choice["text"] = echo + c.text;
      } else {
        choice["message"] = assistant_message(p);
      }
      out.push_back(std::move(choice));
    }
    return dump_json(json{{"id", id},
                          {"object", completion ? "text_completion" : "chat.completion"},
                          {"created", created},
                          {"model", model},
                          {"choices", std::move(out)},
                          {"usage", usage()}});
  }

  void cancel_all() {
    for (auto& weak : jobs)
      if (auto job = weak.lock(); job && !job->finished()) job->cancel();
  }
};

std::string finish_reason_of(const json& chunk) {
  return chunk.value("details", json::object()).value("finish_reason", "");
}

// An unsuccessful final chunk -> its answer before anything was sent; false when it succeeded.
bool respond_failed(HttpSession& s, const json& final_chunk) {
  const std::string reason = finish_reason_of(final_chunk);
  if (reason == "error") {
    s.respond(424, error_body(424, final_chunk.value("error", "model error")));
    return true;
  }
  if (reason == "cancelled") {
    s.respond(503, error_body(503, "generation cancelled"));
    return true;
  }
  return false;
}

void on_chunk(const std::shared_ptr<HttpSession>& session, const std::shared_ptr<ChatRun>& run,
              int index, const json& chunk, bool final) {
  HttpSession& s = *session;
  ChatRun& r = *run;
  Choice& c = r.choices[index];
  if (!r.begun) {
    r.begun = true;
    s.ctx().metrics.first_token(std::chrono::duration<double>(Clock::now() - r.started).count());
    if (r.req.stream && !(final && finish_reason_of(chunk) == "error")) {
      s.stream_begin(content_type_of(StreamFormat::OpenAiSse));
      for (int i = 0; i < r.req.n; ++i) {  // OpenAI streams the role first (or the echo)
        json first = r.completion
                         ? r.chunk(i, r.echo, nullptr, nullptr)
                         : chat_chunk(r.id, r.created, r.model, i,
                                      json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
        if (r.req.include_usage) first["usage"] = nullptr;
        if (!r.completion || !r.echo.empty()) s.stream_write(r.sse(first));
      }
    }
  }
  r.record(c, chunk);
  if (final) {
    c.final_chunk = chunk;
    json d = chunk.value("details", json::object());
    s.ctx().metrics.tokens(d.value("prompt_tokens", 0), d.value("generated_tokens", 0));
    --r.pending;
  }
  if (r.answered) return;
  if (!r.req.stream || !s.streaming()) {
    if (final && respond_failed(s, chunk)) {
      r.answered = true;
      r.cancel_all();
      return;
    }
    if (r.pending > 0) return;
    r.answered = true;
    s.respond(200, r.response());
    return;
  }
  if (final) {
    r.stream_final(s, index, c);
  } else {
    r.stream_content(s, index, c);
  }
  if (r.pending > 0) return;
  r.answered = true;
  if (r.req.include_usage) {
    json u = json{{"id", r.id},
                  {"object", r.completion ? "text_completion" : "chat.completion.chunk"},
                  {"created", r.created}, {"model", r.model},
                  {"choices", json::array()}, {"usage", r.usage()}};
    s.stream_write(r.sse(u));
  }
  s.stream_write("data: [DONE]\n\n");
  s.stream_end();
}

// Starts the run's choices (one plugin stream each) and answers a refusal.
void start_choices(const std::shared_ptr<HttpSession>& session, const std::shared_ptr<ChatRun>& run,
                   const std::string& id_prefix) {
  HttpSession& s = *session;
  Model& m = *s.ctx().model;
  static std::atomic<uint64_t> counter{0};
  run->created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  run->id = id_prefix + std::to_string(run->created) + "-" + std::to_string(counter++);
  run->model = m.name();
  run->started = Clock::now();
  run->choices.resize(run->req.n);
  run->pending = run->req.n;
  for (int i = 0; i < run->req.n; ++i) {
    auto r = StreamJob::start(m, s.executor(), run->requests[size_t(i)],
                              [session, run, i](const json& chunk, bool final) {
                                on_chunk(session, run, i, chunk, final);
                              });
    if (!r.job) {
      // Refused (a template error, a bad parameter, the queue full): stop the ones started;
      // their final chunks still come and are ignored.
      run->answered = true;
      run->cancel_all();
      count_rejection(s, r.status);
      int code = http_status_of(r.status);
      return s.respond(code, error_body(code, r.error, r.field));
    }
    run->jobs.push_back(r.job);
  }
  ServerContext* ctx = &s.ctx();
  s.on_disconnect([run, ctx] {
    for (auto& weak : run->jobs) {
      if (auto job = weak.lock(); job && !job->finished()) {
        ctx->metrics.stream_cancelled();
        job->cancel();
      }
    }
  });
}

}  // namespace

void handle_chat(const std::shared_ptr<HttpSession>& session) {
  HttpSession& s = *session;
  if (!check_ready(s)) return;
  auto run = std::make_shared<ChatRun>();
  try {
    run->req = parse_chat_request(s.request().body());
  } catch (const BadRequest& e) {
    return s.respond(400, error_body(400, e.what(), e.field));
  }
  Model& m = *s.ctx().model;
  if (!run->req.model.empty() && run->req.model != m.name()) {
    return s.respond(404, error_body(404,
                                     "unknown model '" + json_bounds::clip(run->req.model) +
                                         "'; this server serves '" + m.name() + "'",
                                     "model"));
  }
  const json parser = m.config().value("tool_call_parser", json(nullptr));
  run->format = tool_call_format(parser.is_string() ? parser.get<std::string>() : "")
                    .value_or(ToolCallFormat::None);
  for (int i = 0; i < run->req.n; ++i) run->requests.push_back(choice_request(run->req, i));
  start_choices(session, run, "chatcmpl-lmx-");
}

void handle_completion_choices(const std::shared_ptr<HttpSession>& session,
                               const OpenAiRequest& req) {
  auto run = std::make_shared<ChatRun>();
  run->completion = true;
  run->req.n = req.n;
  run->req.stream = req.stream;
  run->req.logprobs = req.logprobs;
  run->req.top_logprobs = req.top_logprobs;
  run->req.include_usage = req.include_usage;
  if (req.echo) run->echo = req.lmi["inputs"].get<std::string>();
  for (int i = 0; i < req.n; ++i) {
    json one = req.lmi;
    // Choice i samples with seed + i: n different, reproducible samples.
    if (auto sd = one["parameters"].find("seed"); sd != one["parameters"].end() &&
                                                   sd->is_number_integer() && i > 0)
      *sd = sd->get<int64_t>() + i;
    run->requests.push_back(dump_json(one));
  }
  start_choices(session, run, "cmpl-lmx-");
}

}  // namespace lmx::server
