// One HTTP/1.1 connection (keep-alive): reads requests with a body limit, hands each to the
// router, and writes either one whole response or a chunked stream. Runs on its own strand.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "container/server_context.h"

namespace lmx::server {

using Request = boost::beast::http::request<boost::beast::http::string_body>;

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx);
  void run();

  // ---- for the router; all on this connection's strand ----
  ServerContext& ctx() { return ctx_; }
  boost::asio::any_io_executor executor() { return stream_.get_executor(); }
  const Request& request() const { return *request_; }
  // Names the endpoint for metrics (set by the router before answering).
  void set_endpoint(std::string endpoint) { endpoint_ = std::move(endpoint); }

  void respond(int status, std::string body, const std::string& content_type = "application/json",
               const std::string& allow = {});
  // A chunked response: the header goes out with the first write.
  void stream_begin(const std::string& content_type);
  void stream_write(std::string bytes);
  void stream_end();
  bool streaming() const { return streaming_; }
  // True once the client is known to be gone (a write failed or the socket hit EOF).
  bool gone() const { return gone_; }
  // Called once if the client disconnects before this request is answered.
  void on_disconnect(std::function<void()> fn);

 private:
  void do_read();
  void on_read(boost::beast::error_code ec, std::size_t bytes);
  void finish_request(int status);
  void after_response(bool keep_alive);
  void pump();
  void watch_socket();
  void mark_gone();

  boost::beast::tcp_stream stream_;
  ServerContext& ctx_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::optional<Request> request_;
  std::string endpoint_;
  std::chrono::steady_clock::time_point started_;
  bool in_request_ = false;
  bool keep_alive_ = true;
  uint64_t request_seq_ = 0;
  bool gone_ = false;
  std::function<void()> on_disconnect_;

  // Streaming state.
  bool streaming_ = false;
  bool header_sent_ = false;
  bool writing_ = false;
  bool chunk_in_flight_ = false;  // out_.front() is being written: its buffer must stay alive
  bool end_queued_ = false;
  std::deque<std::string> out_;
  std::unique_ptr<boost::beast::http::response<boost::beast::http::empty_body>> stream_head_;
  std::unique_ptr<boost::beast::http::response_serializer<boost::beast::http::empty_body>>
      stream_serializer_;
};

}  // namespace lmx::server
