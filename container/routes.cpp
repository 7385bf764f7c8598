#include "container/routes.h"

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "container/chat_routes.h"
#include "container/generate.h"
#include "container/http_rules.h"
#include "container/http_session.h"
#include "container/lmi_schema.h"
#include "plugin/json_bounds.h"

namespace lmx::server {

namespace http = boost::beast::http;
using nlohmann::json;

namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

void method_not_allowed(HttpSession& s, const char* allow) {
  s.respond(405, error_body(405, std::string("method not allowed; use ") + allow),
            "application/json", allow);
}

// 415 for a POST body no route reads (http_rules.h, readable_body_type); true when it answered.
bool refuse_body_type(HttpSession& s) {
  const auto it = s.request().find(http::field::content_type);
  std::string_view type;
  if (it != s.request().end()) type = std::string_view(it->value().data(), it->value().size());
  if (readable_body_type(type)) return false;
  s.respond(415,
            error_body(415,
                       "Content-Type '" + json_bounds::clip(std::string(type)) +
                           "' is not supported: send application/json (or text/plain on the "
                           "LMI paths)",
                       "Content-Type"));
  return true;
}

void ping(HttpSession& s) {
  s.set_endpoint("ping");
  Model& m = *s.ctx().model;
  ModelState st = m.state();
  if (s.ctx().draining) {
    s.respond(503, dump_json(json{{"status", "draining"}, {"model", m.name()}}));
    return;
  }
  json body{{"status", st == ModelState::Ready ? "healthy" : model_state_name(st)},
            {"state", model_state_name(st)},
            {"model", m.name()}};
  if (st == ModelState::Failed) body["error"] = m.load_error();
  if (st == ModelState::Ready) {  // which implementation serves the model, and why
    const json engine = m.health().value("engine", json::object());
    for (const char* key :
         {"architecture", "device", "path", "path_reason", "tensor_parallel", "replica_count"})
      if (engine.contains(key)) body[key] = engine[key];
  }
  s.respond(st == ModelState::Ready ? 200 : 503, dump_json(body));
}

void models(HttpSession& s) {
  s.set_endpoint("models");
  Model& m = *s.ctx().model;
  s.respond(
      200,
      dump_json(json{{"models", json::array({json{{"modelName", m.name()},
                                                  {"modelUrl", m.model_dir()},
                                                  {"status", model_state_name(m.state())}}})}}));
}

void metrics(HttpSession& s) {
  s.set_endpoint("metrics");
  Model& m = *s.ctx().model;
  json engine = m.health().value("engine", json::object());
  s.respond(200, s.ctx().metrics.render(engine, model_state_name(m.state())),
            "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

void route(const std::shared_ptr<HttpSession>& session) {
  HttpSession& s = *session;
  const Request& req = s.request();
  const std::string& path = s.path();
  // HEAD is GET without the body (the session leaves the body out of every HEAD response).
  bool get = req.method() == http::verb::get || req.method() == http::verb::head;
  bool post = req.method() == http::verb::post;
  Model& m = *s.ctx().model;

  if (path == "/ping" || path == "/health") {
    if (!get) return method_not_allowed(s, "GET, HEAD");
    return ping(s);
  }
  if (path == "/models") {
    if (!get) return method_not_allowed(s, "GET, HEAD");
    return models(s);
  }
  if (path == "/metrics") {
    if (!get) return method_not_allowed(s, "GET, HEAD");
    return metrics(s);
  }
  if (path == "/invocations") {
    if (!post) return method_not_allowed(s, "POST");
    s.set_endpoint("invocations");
    if (refuse_body_type(s)) return;
    return handle_lmi(session, /*force_stream=*/false, /*event_stream=*/false);
  }
  if (starts_with(path, "/predictions/")) {
    s.set_endpoint("predictions");
    std::string name = path.substr(std::string_view("/predictions/").size());
    if (name != m.name()) {
      return s.respond(404, error_body(404,
                                       "unknown model '" + json_bounds::clip(name) +
                                           "'; this server serves '" + m.name() + "'",
                                       "model"));
    }
    if (!post) return method_not_allowed(s, "POST");
    if (refuse_body_type(s)) return;
    return handle_lmi(session, false, false);
  }
  if (starts_with(path, "/endpoints/")) {
    // The SageMaker runtime API itself (the AWS SDKs call these when endpoint_url points here).
    std::string rest = path.substr(std::string_view("/endpoints/").size());
    auto slash = rest.find('/');
    std::string action = slash == std::string::npos ? "" : rest.substr(slash + 1);
    if (action == "invocations") {
      if (!post) return method_not_allowed(s, "POST");
      s.set_endpoint("invocations");
      if (refuse_body_type(s)) return;
      return handle_lmi(session, false, false);
    }
    if (action == "invocations-response-stream") {
      if (!post) return method_not_allowed(s, "POST");
      s.set_endpoint("invocations_stream");
      if (refuse_body_type(s)) return;
      return handle_lmi(session, true, true);
    }
  }
  if (path == "/v1/completions") {
    if (!post) return method_not_allowed(s, "POST");
    s.set_endpoint("completions");
    if (refuse_body_type(s)) return;
    return handle_openai(session);
  }
  if (path == "/v1/chat/completions") {
    if (!post) return method_not_allowed(s, "POST");
    s.set_endpoint("chat_completions");
    if (refuse_body_type(s)) return;
    return handle_chat(session);
  }
  s.set_endpoint("not_found");
  if (path.empty()) {
    return s.respond(400, error_body(400,
                                     "request target must be a path or an http(s) URL: " +
                                         json_bounds::clip(std::string(req.target())),
                                     "path"));
  }
  s.respond(404, error_body(404, "no such path: " + json_bounds::clip(path), "path"));
}

}  // namespace lmx::server
