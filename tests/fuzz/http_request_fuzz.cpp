// The bytes a client sends on one lmx-server connection -> the requests the server reads from it,
// through the code HttpSession runs (container/http_framing.h: Beast's parser with every part
// bounded, the framing and Expect checks, the answer to each read error), then the request
// target's path and the media type (container/http_rules.h). Keep-alive requests are read one
// after another from the same buffer, as on a connection.
//
// Input: byte 0 picks how many bytes each read returns (0: all that is left; else 1..255, the
// TCP segments the parser is resumed over); the rest is the byte stream. The limits are small
// (the same code with other numbers) so that short inputs reach every one.
//
// Besides crashes and sanitizer reports, a finding is a broken invariant: a request that is
// served although its framing is ambiguous (Transfer-Encoding not parsed as chunked, or with a
// Content-Length), a body, buffer or extension total past its limit, a refusal with a status or
// message the server does not send, a path that is not "/..." or keeps its query, a media type
// that is not lower case without parameters.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "container/http_framing.h"
#include "tests/support/byte_stream.h"
#include "container/http_rules.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using lmx::server::Refusal;
using lmx::testing::ByteStream;

[[noreturn]] void broken(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "http_request invariant broken: %s [%.*s]\n", what,
               static_cast<int>(std::min<std::size_t>(detail.size(), 300)), detail.data());
  std::abort();
}

void check_refusal(const Refusal& r) {
  switch (r.status) {
    case 400: case 413: case 417: case 431: case 501: break;
    default: broken("refusal status", std::to_string(r.status));
  }
  if (r.message.empty() || r.message.size() > 200) broken("refusal message", r.message);
  if (r.field.empty()) broken("refusal without a field", r.message);
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

void check_request(const lmx::server::RequestReader& reader,
                   const lmx::server::FramingLimits& limits) {
  const auto& parser = reader.parser();
  const auto& req = parser.get();
  if (req.body().size() > limits.body) broken("body past its limit");
  if (reader.chunk_extension_bytes() > limits.chunk_extensions) broken("extensions past limit");
  const bool te = req.find(http::field::transfer_encoding) != req.end();
  const bool cl = req.find(http::field::content_length) != req.end();
  // One framing, the one the parser used (else the rest of the body is read as a request).
  if (te && cl) broken("served with Transfer-Encoding and Content-Length");
  if (te && !parser.chunked()) broken("Transfer-Encoding served but not read as chunked");
  if (te && req.version() < 11) broken("Transfer-Encoding served in HTTP/1.0");

  const auto target = req.target();
  const std::string path = lmx::server::request_path(std::string_view(target.data(), target.size()));
  if (!path.empty() && (path.front() != '/' || path.find_first_of("?#") != std::string::npos))
    broken("request path", path);
  if (!target.empty() && target.front() == '/' &&
      std::string_view(target.data(), target.size()).substr(0, path.size()) != path)
    broken("origin-form path is not the target's prefix", path);
  if (iequals(std::string_view(target.data(), std::min<std::size_t>(target.size(), 7)), "http://") &&
      path.empty())
    broken("absolute-form target without a path", std::string_view(target.data(), target.size()));

  const auto ct = req.find(http::field::content_type);
  if (ct != req.end()) {
    const std::string media = lmx::server::media_type(
        std::string_view(ct->value().data(), ct->value().size()));
    for (char c : media)
      if ((c >= 'A' && c <= 'Z') || c == ';') broken("media type", media);
    if (!media.empty() && (media.front() == ' ' || media.front() == '\t' || media.back() == ' ' ||
                           media.back() == '\t'))
      broken("media type not trimmed", media);
  }
}

// Reads requests off one connection the way HttpSession does, until it would close.
void serve_connection(std::string_view bytes, std::size_t segment) {
  lmx::server::FramingLimits limits;
  limits.body = 8 * 1024;
  limits.header = 2 * 1024;
  limits.buffer = limits.header + 512;
  limits.chunk_extensions = 1024;
  ByteStream stream(bytes, segment);
  beast::flat_buffer buffer(limits.buffer);
  for (int n = 0; n < 64; ++n) {
    lmx::server::RequestReader reader(limits);
    beast::error_code ec;
    http::read_header(stream, buffer, reader.parser(), ec);
    if (buffer.size() > limits.buffer) broken("buffer past its limit");
    if (lmx::server::client_gone(ec)) return;
    if (ec) return check_refusal(reader.refusal_for(ec));
    bool send_continue = false;
    if (auto refusal = reader.check_header(send_continue)) return check_refusal(*refusal);
    if (send_continue && reader.parser().get().version() < 11) broken("100 Continue to HTTP/1.0");
    if (!reader.parser().is_done()) http::read(stream, buffer, reader.parser(), ec);
    if (buffer.size() > limits.buffer) broken("buffer past its limit");
    if (lmx::server::client_gone(ec)) return;
    if (ec) return check_refusal(reader.refusal_for(ec));
    check_request(reader, limits);
    if (!reader.parser().get().keep_alive()) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::size_t segment = data[0] == 0 ? size : data[0];
  const std::string_view bytes = lmx::fuzz::text(data + 1, size - 1);
  lmx::fuzz::expect_only_lmx_errors([&] { serve_connection(bytes, segment); });
  return 0;
}
