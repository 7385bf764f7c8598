// How lmx-server reads one request off a connection, apart from the I/O: Beast's parser with every
// part of the request bounded, the checks of http_rules.h once the header is in (framing,
// Expect), and the answer to each error the parser reports. HttpSession drives it over a socket;
// the http_request fuzz target (tests/fuzz/http_request_fuzz.cpp) drives the same code over bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include "container/http_rules.h"

namespace lmx::server {

inline constexpr std::size_t kHeaderLimit = 64 * 1024;
inline constexpr std::size_t kBufferLimit = kHeaderLimit + 8 * 1024;
inline constexpr std::size_t kChunkExtensionLimit = 64 * 1024;

struct FramingLimits {
  std::uint64_t body = 6 * 1024 * 1024;  // the body (413): --max-body-bytes
  std::size_t header = kHeaderLimit;     // request line and fields (431)
  // Bytes buffered at once (the connection's buffer: a chunk-size line with its extensions, the
  // trailer; 400). Must exceed `header`.
  std::size_t buffer = kBufferLimit;
  std::size_t chunk_extensions = kChunkExtensionLimit;  // all extensions of one request (400)
};

// A read that ended because the client is gone (closed, reset) or too slow (the read timeout):
// nobody is left to answer.
bool client_gone(const boost::beast::error_code& ec);

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// One request's parser. Not copyable or movable: the parser refers to the chunk-header callback
// that counts extensions here.
class RequestReader {
 public:
  explicit RequestReader(const FramingLimits& limits);
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  RequestParser& parser() { return parser_; }
  const RequestParser& parser() const { return parser_; }

  // Once the header is read: a refusal (answered without reading the body, then the connection is
  // closed) or none; `send_continue` says whether an interim 100 Continue goes out before the body
  // is read (an HTTP/1.1 Expect: 100-continue with a body still to come).
  std::optional<Refusal> check_header(bool& send_continue) const;

  // The answer to an error the parser reported while reading (not a closed connection).
  Refusal refusal_for(boost::beast::error_code ec) const;

  std::size_t chunk_extension_bytes() const { return chunk_extension_bytes_; }

 private:
  FramingLimits limits_;
  std::size_t chunk_extension_bytes_ = 0;
  std::function<void(std::uint64_t, boost::beast::string_view, boost::beast::error_code&)>
      on_chunk_header_;
  RequestParser parser_;
};

}  // namespace lmx::server
