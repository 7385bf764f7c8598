#include "container/lmi_schema.h"

#include "container/http_rules.h"
#include "plugin/json_bounds.h"

namespace lmx::server {

using nlohmann::json;

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json parse_body(const std::string& body) {
  json j;
  switch (json_bounds::parse(body, j)) {
    case json_bounds::ParseStatus::TooDeep:
      throw BadRequest("body", "body: " + json_bounds::too_deep_message());
    case json_bounds::ParseStatus::Malformed:
      throw BadRequest("body", "body: malformed JSON");
    case json_bounds::ParseStatus::Ok:
      break;
  }
  if (!j.is_object()) throw BadRequest("body", "body: must be a JSON object");
  return j;
}

LmiShape inspect_lmi_request(const std::string& body, const std::string& content_type) {
  LmiShape s;
  if (media_type(content_type) == "text/plain") {
    s.body = json{{"inputs", body}};
    return s;
  }
  s.body = parse_body(body);
  if (auto it = s.body.find("stream"); it != s.body.end() && !it->is_null()) {
    if (!it->is_boolean()) throw BadRequest("stream", "stream: must be true or false");
    s.stream = it->get<bool>();
  }
  if (auto it = s.body.find("inputs"); it != s.body.end()) s.batched = it->is_array();
  if (auto p = s.body.find("parameters"); p != s.body.end() && p->is_object()) {
    if (auto d = p->find("details"); d != p->end() && d->is_boolean()) s.details = d->get<bool>();
  }
  if (s.stream && s.batched) {
    throw BadRequest("inputs", "inputs: streaming takes one string, not a list");
  }
  return s;
}

int http_status_of(lmx_status status) {
  switch (status) {
    case LMX_STATUS_OK:
      return 200;
    case LMX_STATUS_INVALID_REQUEST:
      return 400;
    case LMX_STATUS_QUEUE_FULL:
    case LMX_STATUS_UNAVAILABLE:
      return 503;
    case LMX_STATUS_MODEL_ERROR:
      return 424;
    case LMX_STATUS_NOT_FOUND:
      return 404;
    default:
      return 500;
  }
}

std::string error_body(int http_status, const std::string& message, const std::string& field) {
  // Messages name the problem; the bounds keep one that quotes too much (a megabyte key from a
  // plugin that does not clip) from turning into a megabyte answer.
  return dump_json(json{
      {"error", json_bounds::clip(message, kMaxErrorBytes)},
      {"field", field.empty() ? json(nullptr) : json(json_bounds::clip(field, kMaxFieldBytes))},
      {"code", http_status}});
}

json lmi_response_from_final(const json& final_chunk, bool details) {
  json r{{"generated_text", final_chunk.value("generated_text", "")}};
  if (details && final_chunk.contains("details")) r["details"] = final_chunk["details"];
  return r;
}

}  // namespace lmx::server
