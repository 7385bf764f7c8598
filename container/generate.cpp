#include "container/generate.h"

#include <chrono>
#include <string>

#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "container/http_session.h"
#include "container/lmi_schema.h"
#include "container/openai_schema.h"
#include "container/streaming.h"

namespace lmx::server {

namespace http = boost::beast::http;
namespace net = boost::asio;
using nlohmann::json;

namespace {

// 503 unless the model is ready and the server is not draining.
bool check_ready(HttpSession& s) {
  Model& m = *s.ctx().model;
  if (s.ctx().draining) {
    s.respond(503, error_body(503, "server is shutting down"));
    return false;
  }
  if (m.state() != ModelState::Ready) {
    json body =
        json::parse(error_body(503, std::string("model is ") + model_state_name(m.state())));
    body["state"] = model_state_name(m.state());
    s.respond(503, dump_json(body));
    return false;
  }
  return true;
}

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
    s.respond(503, error_body(503, "generation cancelled (server shutting down)"));
    return true;
  }
  return false;
}

// Runs lmx_predict on the blocking pool and answers with `convert(response)` on the strand.
template <typename Convert>
void predict_blocking(const std::shared_ptr<HttpSession>& session, std::string request_json,
                      Convert convert) {
  ServerContext& ctx = session->ctx();
  net::post(*ctx.blocking, [session, request_json = std::move(request_json), convert, &ctx] {
    const auto& api = ctx.model->api();
    char* out = nullptr;
    lmx_status st = api.predict(ctx.model->handle(), request_json.c_str(), &out);
    std::string text = out ? out : "";
    std::string field = st == LMX_STATUS_OK ? "" : api.last_error_field();
    std::string error = st == LMX_STATUS_OK ? "" : api.last_error();
    api.free_string(out);
    net::post(session->executor(), [session, st, text, field, error, convert] {
      if (st != LMX_STATUS_OK) {
        int code = http_status_of(st);
        session->respond(code, error_body(code, error, field));
        return;
      }
      json j = json::parse(text, nullptr, false);
      if (j.is_array()) {
        for (const auto& r : j) {
          if (r.contains("details")) {
            session->ctx().metrics.tokens(r["details"].value("prompt_tokens", 0),
                                          r["details"].value("generated_tokens", 0));
          }
        }
      }
      session->respond(200, convert(j));
    });
  });
}

// Starts a streamed generation for `request_json`; answers the start failure itself.
std::shared_ptr<StreamJob> start_job(const std::shared_ptr<HttpSession>& session,
                                     const std::string& request_json, StreamJob::OnChunk on_chunk) {
  auto r = StreamJob::start(*session->ctx().model, session->executor(), request_json,
                            std::move(on_chunk));
  if (!r.job) {
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
  bool stream = shape.stream || force_stream;
  if (force_stream && shape.batched) {
    return s.respond(400,
                     error_body(400, "inputs: streaming takes one string, not a list", "inputs"));
  }
  shape.body.erase("stream");
  std::string request_json = dump_json(shape.body);
  if (shape.batched) {
    return predict_blocking(session, request_json, [](const json& j) { return dump_json(j); });
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
    return s.respond(
        404, error_body(404, "unknown model '" + req.model + "'; this server serves '" + name + "'",
                        "model"));
  }
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
    json lmi = req.lmi;
    lmi["parameters"]["details"] = true;
    return predict_blocking(
        session, dump_json(lmi), [id, created, model, echo, prompts](const json& j) {
          return dump_json(completion_response(id, created, model, j, echo, prompts));
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
