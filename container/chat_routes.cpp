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
  json logprobs = json::array();
  size_t logprobs_sent = 0;
  json final_chunk;        // null until finished
};

// The state of one chat request: its choices and how it is answered.
struct ChatRun {
  ChatRequest req;
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

  json logprobs_since(Choice& c) {
    if (!req.logprobs) return nullptr;
    json content = json::array();
    for (size_t k = c.logprobs_sent; k < c.logprobs.size(); ++k) content.push_back(c.logprobs[k]);
    c.logprobs_sent = c.logprobs.size();
    return json{{"content", std::move(content)}};
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
    c.text += text;
    if (req.logprobs && (*t)["id"].is_number() && (*t)["log_prob"].is_number())
      c.logprobs.push_back(logprob_entry(text, (*t)["log_prob"].get<double>()));
  }

  // Streams the choice's new content, holding back what may be a tool call.
  void stream_content(HttpSession& s, int index, Choice& c) {
    size_t upto = req.tools ? tool_call_start(format, c.text) : c.text.size();
    if (upto <= c.sent) return;
    json delta{{"content", c.text.substr(c.sent, upto - c.sent)}};
    c.sent = upto;
    s.stream_write(sse(chat_chunk(id, created, model, index, delta, logprobs_since(c), nullptr)));
  }

  void stream_final(HttpSession& s, int index, Choice& c) {
    ParsedOutput out = parsed(c);
    if (!out.calls.empty()) {
      json delta{{"tool_calls", tool_call_deltas(out)}};
      s.stream_write(sse(chat_chunk(id, created, model, index, delta, logprobs_since(c), nullptr)));
    } else if (c.sent < c.text.size()) {
      json delta{{"content", c.text.substr(c.sent)}};
      c.sent = c.text.size();
      s.stream_write(sse(chat_chunk(id, created, model, index, delta, logprobs_since(c), nullptr)));
    }
    json last = chat_chunk(id, created, model, index, json::object(), nullptr, reason(c.final_chunk, out));
    if (c.final_chunk.contains("error")) last["error"] = c.final_chunk["error"];
    if (req.include_usage) last["usage"] = nullptr;
    s.stream_write(sse(last));
  }

  json usage() const {
    int64_t prompt = 0, completion = 0;
    for (const auto& c : choices) {
      json d = c.final_chunk.value("details", json::object());
      prompt = std::max<int64_t>(prompt, d.value("prompt_tokens", 0));  // the same prompt n times
      completion += d.value("generated_tokens", 0);
    }
    return usage_json(prompt, completion);
  }

  std::string response() const {
    json out = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      const Choice& c = choices[i];
      ParsedOutput p = parsed(c);
      out.push_back(json{{"index", i},
                         {"message", assistant_message(p)},
                         {"logprobs", req.logprobs ? json{{"content", c.logprobs}} : json(nullptr)},
                         {"finish_reason", reason(c.final_chunk, p)}});
    }
    return dump_json(json{{"id", id},
                          {"object", "chat.completion"},
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
      for (int i = 0; i < r.req.n; ++i) {  // OpenAI streams the role first
        json delta{{"role", "assistant"}, {"content", ""}};
        json first = chat_chunk(r.id, r.created, r.model, i, delta, nullptr, nullptr);
        if (r.req.include_usage) first["usage"] = nullptr;
        s.stream_write(r.sse(first));
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
    json u = json{{"id", r.id},           {"object", "chat.completion.chunk"},
                  {"created", r.created}, {"model", r.model},
                  {"choices", json::array()}, {"usage", r.usage()}};
    s.stream_write(r.sse(u));
  }
  s.stream_write("data: [DONE]\n\n");
  s.stream_end();
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
  static std::atomic<uint64_t> counter{0};
  run->created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  run->id = "chatcmpl-lmx-" + std::to_string(run->created) + "-" + std::to_string(counter++);
  run->model = m.name();
  run->started = Clock::now();
  run->choices.resize(run->req.n);
  run->pending = run->req.n;
  for (int i = 0; i < run->req.n; ++i) {
    auto r = StreamJob::start(m, s.executor(), choice_request(run->req, i),
                              [session, run, i](const json& chunk, bool final) {
                                on_chunk(session, run, i, chunk, final);
                              });
    if (!r.job) {
      // Refused (a template error, a bad parameter, the queue full): stop the ones started;
      // their final chunks still come and are ignored.
      run->answered = true;
      run->cancel_all();
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

}  // namespace lmx::server
