// Test support: a client's bytes as a Beast SyncReadStream, `segment` bytes a read (the TCP
// segments a parser is resumed over), then end of stream. Used by the HTTP framing test and the
// http_request fuzz target (container/http_framing.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>

namespace lmx::testing {

class ByteStream {
 public:
  ByteStream(std::string_view data, std::size_t segment) : data_(data), segment_(segment) {}

  template <typename MutableBuffers>
  std::size_t read_some(const MutableBuffers& buffers, boost::beast::error_code& ec) {
    if (data_.empty()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    const std::size_t n = boost::asio::buffer_copy(
        buffers, boost::asio::buffer(data_.data(), std::min(segment_, data_.size())));
    data_.remove_prefix(n);
    return n;
  }
  template <typename MutableBuffers>
  std::size_t read_some(const MutableBuffers& buffers) {
    boost::beast::error_code ec;
    const std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::beast::system_error(ec);
    return n;
  }

 private:
  std::string_view data_;
  std::size_t segment_;
};

}  // namespace lmx::testing
