// What the server itself needs to know of the LMI schema: the request's shape (streaming? list?
// details?), plugin status -> HTTP status, error bodies, final stream chunk -> LMI response.
// Full validation of inputs and parameters is the plugin's (it names the bad field).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "plugin/include/lmx/plugin.h"

namespace lmx::server {

// A request the server refuses before it reaches the plugin (HTTP 400).
class BadRequest : public std::runtime_error {
 public:
  BadRequest(std::string bad_field, const std::string& message)
      : std::runtime_error(message), field(std::move(bad_field)) {}
  std::string field;
};

struct LmiShape {
  nlohmann::json body;  // the request as JSON (a text/plain body becomes {"inputs": text})
  bool stream = false;
  bool batched = false;
  bool details = false;
};

// A request body as a JSON object. Throws BadRequest (field "body") for malformed JSON, JSON
// nested deeper than json_bounds::kMaxDepth, or a value that is not an object.
nlohmann::json parse_body(const std::string& body);

// Throws BadRequest for a body that is not JSON or not an object. A text/plain body (media
// types are case-insensitive) is the input itself.
LmiShape inspect_lmi_request(const std::string& body, const std::string& content_type);

int http_status_of(lmx_status status);

// Longest error message and field name an error body carries (longer ones are cut, "...").
inline constexpr std::size_t kMaxErrorBytes = 1024;
inline constexpr std::size_t kMaxFieldBytes = 128;

// {"error": message, "field": field|null, "code": http_status}
std::string error_body(int http_status, const std::string& message, const std::string& field = {});

// The final stream chunk of one input -> {"generated_text", "details"?} of lmx_predict.
nlohmann::json lmi_response_from_final(const nlohmann::json& final_chunk, bool details);

std::string dump_json(const nlohmann::json& j);

}  // namespace lmx::server
