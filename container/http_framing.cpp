#include "container/http_framing.h"

#include <string>

#include <boost/asio/error.hpp>

namespace lmx::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

bool client_gone(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == beast::error::timeout ||
         ec == net::error::operation_aborted || ec == net::error::bad_descriptor;
}

RequestReader::RequestReader(const FramingLimits& limits) : limits_(limits) {
  parser_.body_limit(limits_.body);
  parser_.header_limit(static_cast<std::uint32_t>(limits_.header));
  // Extensions are parsed and dropped; their total is bounded like every other part.
  on_chunk_header_ = [this](std::uint64_t, beast::string_view extensions, beast::error_code& ec) {
    chunk_extension_bytes_ += extensions.size();
    if (chunk_extension_bytes_ > limits_.chunk_extensions) ec = http::error::bad_chunk_extension;
  };
  parser_.on_chunk_header(on_chunk_header_);
}

std::optional<Refusal> RequestReader::check_header(bool& send_continue) const {
  send_continue = false;
  const auto& h = parser_.get();
  if (auto refusal = check_framing(h)) return refusal;
  std::optional<Refusal> refusal;
  const bool continue_expected = expects_continue(h, refusal);
  if (refusal) return refusal;
  // (A Content-Length over the body limit was refused with the header: no 100 for it.)
  send_continue = continue_expected && !parser_.is_done();
  return std::nullopt;
}

Refusal RequestReader::refusal_for(beast::error_code ec) const {
  if (ec == http::error::body_limit) {
    return {413, "request body exceeds " + std::to_string(limits_.body) + " bytes", "body"};
  }
  if (!parser_.is_header_done() &&
      (ec == http::error::header_limit || ec == http::error::buffer_overflow)) {
    return {431, "request header exceeds " + std::to_string(limits_.header) + " bytes", "header"};
  }
  if (ec == http::error::buffer_overflow) {
    return {400,
            "a chunk-size line or the trailer exceeds " + std::to_string(limits_.buffer) +
                " bytes",
            "body"};
  }
  if (ec == http::error::bad_chunk_extension &&
      chunk_extension_bytes_ > limits_.chunk_extensions) {
    return {400, "chunk extensions exceed " + std::to_string(limits_.chunk_extensions) + " bytes",
            "body"};
  }
  if (ec == http::error::bad_transfer_encoding || ec == http::error::bad_content_length) {
    return {400, "conflicting or invalid Transfer-Encoding / Content-Length", "Transfer-Encoding"};
  }
  return {400, "malformed HTTP request: " + ec.message(),
          parser_.is_header_done() ? "body" : "header"};
}

}  // namespace lmx::server
