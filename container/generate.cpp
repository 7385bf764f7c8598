#include "container/generate.h"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "container/chat_routes.h"
#include "container/http_session.h"
#include "container/lmi_schema.h"
#include "container/openai_schema.h"
#include "container/streaming.h"
#include "plugin/json_bounds.h"

namespace lmx::server {

namespace http = boost::beast::http;
using nlohmann::json;

void count_rejection(HttpSession& s, int32_t status) {
  if (status == LMX_STATUS_QUEUE_FULL) s.ctx().metrics.rejected(Metrics::Rejection::QueueFull);
  if (status == LMX_STATUS_UNAVAILABLE)
    s.ctx().metrics.rejected(s.ctx().draining ? Metrics::Rejection::Draining
                                              : Metrics::Rejection::NotReady);
}

bool check_ready(HttpSession& s) {
  Model& m = *s.ctx().model;
  if (s.ctx().draining) {
    s.ctx().metrics.rejected(Metrics::Rejection::Draining);
    s.respond(503, error_body(503, "server is shutting down"));
    return false;
  }
  if (m.state() != ModelState::Ready) {
    s.ctx().metrics.rejected(Metrics::Rejection::NotReady);
    json body =
        json::parse(error_body(503, std::string("model is ") + model_state_name(m.state())));
    body["state"] = model_state_name(m.state());
    s.respond(503, dump_json(body));
    return false;
  }
  return true;
}

namespace {

std::string finish_reason_of(const json& chunk) {
  if (!chunk.contains("details") || !chunk["details"].is_object()) return "";
  return chunk["details"].value("finish_reason", "");
}

std::string chunk_text(const json& chunk) {
  if (chunk.contains("token") && chunk["token"].is_object() && chunk["token"]["text"].is_string()) {
    return chunk["token"]["text"].get<std::string>();
  }
  return "";
}

void count_tokens(HttpSession& s, const json& final_chunk) {
  json d = final_chunk.value("details", json::object());
  s.ctx().metrics.tokens(d.value("prompt_tokens", 0), d.value("generated_tokens", 0));
}

// The answer for a finished non-streamed generation that did not succeed; false when it did.
bool respond_failed(HttpSession& s, const json& final_chunk) {
  std::string reason = finish_reason_of(final_chunk);
  if (reason == "error") {
    s.respond(424, error_body(424, final_chunk.value("error", "model error")));
    return true;
  }
  if (reason == "cancelled") {
    s.respond(503, error_body(503, s.ctx().draining ? "generation cancelled (server shutting down)"
                                                    : "generation cancelled"));
    return true;
  }
  return false;
}

// Starts a streamed generation for `request_json`; answers the start failure itself.
std::shared_ptr<StreamJob> start_job(const std::shared_ptr<HttpSession>& session,
                                     const std::string& request_json, StreamJob::OnChunk on_chunk) {
  auto r = StreamJob::start(*session->ctx().model, session->executor(), request_json,
                            std::move(on_chunk));
  if (!r.job) {
    count_rejection(*session, r.status);
    int code = http_status_of(r.status);
    session->respond(code, error_body(code, r.error, r.field));
    return nullptr;
  }
  std::weak_ptr<StreamJob> weak = r.job;
  ServerContext* ctx = &session->ctx();
  session->on_disconnect([weak, ctx] {
    if (auto job = weak.lock(); job && !job->finished()) {
      ctx->metrics.stream_cancelled();
      job->cancel();
    }
  });
  return r.job;
}

using Clock = std::chrono::steady_clock;

// A list of inputs runs as one stream per input, so that a client that goes away cancels
// every one of them, as it does a single input. Answers `convert(finals)` (the final chunks, in
// input order) once all are in, or the first failure. `field` names the list in errors
// ("inputs" for LMI, "prompt" for OpenAI).
struct Batch {
  std::vector<std::weak_ptr<StreamJob>> jobs;
  json finals = json::array();
  size_t pending = 0;
  bool answered = false;
};

void run_batch(const std::shared_ptr<HttpSession>& session, const json& request,
               const std::string& field, std::function<std::string(const json& finals)> convert) {
  HttpSession& s = *session;
  const json& inputs = request["inputs"];
  if (inputs.empty()) {
    return s.respond(400, error_body(400, field + ": must not be an empty list", field));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_string() || inputs[i].get_ref<const std::string&>().empty()) {
      std::string element = field + "[" + std::to_string(i) + "]";
      return s.respond(400, error_body(400, element + ": must be a non-empty string", element));
    }
  }
  // More inputs than the queue holds could never be admitted, however often retried.
  int64_t limit = s.ctx().model->config().value("job_queue_size", int64_t{0});
  if (limit > 0 && static_cast<int64_t>(inputs.size()) > limit) {
    return s.respond(413,
                     error_body(413,
                                field + ": " + std::to_string(inputs.size()) +
                                    " inputs exceed job_queue_size (" + std::to_string(limit) +
                                    "); send at most " + std::to_string(limit) + " per request",
                                field));
  }
  auto batch = std::make_shared<Batch>();
  batch->finals = json::array();
  for (size_t i = 0; i < inputs.size(); ++i) batch->finals.push_back(nullptr);
  batch->pending = inputs.size();
  auto on_chunk = [session, batch, convert](size_t i) {
    return [session, batch, convert, i](const json& chunk, bool final) {
      if (!final) return;
      batch->finals[i] = chunk;
      count_tokens(*session, chunk);
      if (--batch->pending > 0 || batch->answered) return;
      batch->answered = true;
      for (const auto& f : batch->finals) {
        if (respond_failed(*session, f)) return;
      }
      session->respond(200, convert(batch->finals));
    };
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    json one = request;
    one["inputs"] = inputs[i];
    auto r = StreamJob::start(*s.ctx().model, s.executor(), dump_json(one), on_chunk(i));
    if (!r.job) {
      // Refused (a bad parameter, the queue full): stop the ones already queued; their final
      // chunks still come and are ignored.
      batch->answered = true;
      for (auto& weak : batch->jobs) {
        if (auto job = weak.lock()) job->cancel();
      }
      count_rejection(s, r.status);
      int code = http_status_of(r.status);
      return s.respond(code, error_body(code, r.error, r.field));
    }
    batch->jobs.push_back(r.job);
  }
  ServerContext* ctx = &s.ctx();
  s.on_disconnect([batch, ctx] {
    for (auto& weak : batch->jobs) {
      if (auto job = weak.lock(); job && !job->finished()) {
        ctx->metrics.stream_cancelled();
        job->cancel();
      }
    }
  });
}

}  // namespace

void handle_lmi(const std::shared_ptr<HttpSession>& session, bool force_stream, bool event_stream) {
  HttpSession& s = *session;
  if (!check_ready(s)) return;
  LmiShape shape;
  try {
    shape = inspect_lmi_request(s.request().body(),
                                std::string(s.request()[http::field::content_type]));
  } catch (const BadRequest& e) {
    return s.respond(400, error_body(400, e.what(), e.field));
  }
  // LMI 0.27's chat schema: {"messages": [...], "parameters": {...}} gets a chat completion.
  if (shape.body.contains("messages") && !force_stream) return handle_chat(session);
  bool stream = shape.stream || force_stream;
  if (force_stream && shape.batched) {
    return s.respond(400,
                     error_body(400, "inputs: streaming takes one string, not a list", "inputs"));
  }
  shape.body.erase("stream");
  std::string request_json = dump_json(shape.body);
  if (shape.batched) {
    bool details = shape.details;
    return run_batch(session, shape.body, "inputs", [details](const json& finals) {
      json out = json::array();
      for (const auto& f : finals) out.push_back(lmi_response_from_final(f, details));
      return dump_json(out);
    });
  }
  StreamFormat format = StreamFormat::JsonLines;
  if (event_stream) {
    format = StreamFormat::EventStream;
  } else if (s.ctx().model->config().value("output_formatter", "json") == "sse") {
    format = StreamFormat::Sse;
  }
  auto started = Clock::now();
  auto first = std::make_shared<bool>(true);
  bool details = shape.details;
  start_job(session, request_json,
            [session, stream, format, details, started, first](const json& chunk, bool final) {
              HttpSession& hs = *session;
              if (*first) {
                *first = false;
                hs.ctx().metrics.first_token(
                    std::chrono::duration<double>(Clock::now() - started).count());
                if (stream && !(final && finish_reason_of(chunk) == "error")) {
                  hs.stream_begin(content_type_of(format));
                }
              }
              if (final) count_tokens(hs, chunk);
              if (!stream || !hs.streaming()) {
                if (!final) return;
                if (respond_failed(hs, chunk)) return;
                hs.respond(200, dump_json(lmi_response_from_final(chunk, details)));
                return;
              }
              std::string line = dump_json(chunk);
              switch (format) {
                case StreamFormat::Sse:
                  hs.stream_write("data: " + line + "\n\n");
                  break;
                case StreamFormat::EventStream:
                  hs.stream_write(aws_event_stream_payload(line + "\n"));
                  break;
                default:
                  hs.stream_write(line + "\n");
              }
              if (final) hs.stream_end();
            });
}

void handle_openai(const std::shared_ptr<HttpSession>& session) {
  HttpSession& s = *session;
  if (!check_ready(s)) return;
  OpenAiRequest req;
  try {
    req = parse_openai_request(s.request().body());
  } catch (const BadRequest& e) {
    return s.respond(400, error_body(400, e.what(), e.field));
  }
  const std::string& name = s.ctx().model->name();
  if (!req.model.empty() && req.model != name) {
    return s.respond(404, error_body(404,
                                     "unknown model '" + json_bounds::clip(req.model) +
                                         "'; this server serves '" + name + "'",
                                     "model"));
  }
  if (req.n > 1 || req.logprobs) return handle_completion_choices(session, req);
  std::string model = name;
  int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  static std::atomic<uint64_t> counter{0};
  std::string id = "cmpl-lmx-" + std::to_string(created) + "-" + std::to_string(counter++);
  json prompts =
      req.lmi["inputs"].is_array() ? req.lmi["inputs"] : json::array({req.lmi["inputs"]});
  bool echo = req.echo;
  if (req.lmi["inputs"].is_array()) {
    return run_batch(
        session, req.lmi, "prompt", [id, created, model, echo, prompts](const json& finals) {
          return dump_json(completion_response(id, created, model, finals, echo, prompts));
        });
  }
  json lmi = req.lmi;
  std::string request_json = dump_json(lmi);
  bool stream = req.stream;
  auto started = Clock::now();
  auto first = std::make_shared<bool>(true);
  start_job(
      session, request_json,
      [session, stream, id, created, model, echo, prompts, started, first](const json& chunk,
                                                                           bool final) {
        HttpSession& hs = *session;
        if (*first) {
          *first = false;
          hs.ctx().metrics.first_token(
              std::chrono::duration<double>(Clock::now() - started).count());
          if (stream && !(final && finish_reason_of(chunk) == "error")) {
            hs.stream_begin(content_type_of(StreamFormat::OpenAiSse));
            if (echo) {
              hs.stream_write("data: " +
                              dump_json(completion_chunk(id, created, model,
                                                         prompts[0].get<std::string>(), nullptr)) +
                              "\n\n");
            }
          }
        }
        if (final) count_tokens(hs, chunk);
        if (!stream || !hs.streaming()) {
          if (!final) return;
          if (respond_failed(hs, chunk)) return;
          hs.respond(200, dump_json(completion_response(id, created, model, json::array({chunk}),
                                                        echo, prompts)));
          return;
        }
        json reason = final ? json(openai_finish_reason(finish_reason_of(chunk))) : json(nullptr);
        json out = completion_chunk(id, created, model, chunk_text(chunk), reason);
        if (final && chunk.contains("error")) out["error"] = chunk["error"];
        if (final) {
          json d = chunk.value("details", json::object());
          int64_t p = d.value("prompt_tokens", 0), g = d.value("generated_tokens", 0);
          out["usage"] = {{"prompt_tokens", p}, {"completion_tokens", g}, {"total_tokens", p + g}};
        }
        hs.stream_write("data: " + dump_json(out) + "\n\n");
        if (final) {
          hs.stream_write("data: [DONE]\n\n");
          hs.stream_end();
        }
      });
}

}  // namespace lmx::server
