// HTTP/1.1 rules of RFC 9110 / 9112 that Beast leaves to the server: which request framings are
// refused before a body is read (request smuggling), Expect, the request target's path (origin
// or absolute form) and media types (case-insensitive, parameters ignored).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>

namespace lmx::server {

using RequestHeader = boost::beast::http::request_header<>;

// A request the server answers without reading its body; the connection is closed after it.
struct Refusal {
  int status;
  std::string message;
  std::string field;
};

// Transfer-Encoding other than a final "chunked": 501 for a coding this server does not
// implement, 400 for chunked not last, repeated or together with Content-Length, or any
// Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1, 6.3).
std::optional<Refusal> check_framing(const RequestHeader& h);

// Expect (RFC 9110 10.1.1): true for "100-continue" in an HTTP/1.1 request (send an interim
// 100 before reading the body); a Refusal (417) for any other expectation.
bool expects_continue(const RequestHeader& h, std::optional<Refusal>& refusal);

// The path of an origin-form ("/ping?x") or absolute-form ("http://host:port/ping") target,
// without the query; "" when the target is neither.
std::string request_path(std::string_view target);

// "type/subtype" of a Content-Type in lower case, without parameters and whitespace.
std::string media_type(std::string_view content_type);

// Whether a request body of this Content-Type is one the POST routes read (LMI, SageMaker,
// OpenAI): JSON (application/json, any "+json" type), text/plain (LMI: the text is the input),
// and the types clients send by default without meaning them (none at all, curl -d's
// application/x-www-form-urlencoded, the AWS SDKs' application/octet-stream), all read as JSON.
// Anything else (XML, HTML, images, multipart forms, ...) is answered 415.
bool readable_body_type(std::string_view content_type);

}  // namespace lmx::server
