// One HTTP/1.1 connection (keep-alive): reads each request's header, refuses framings it cannot
// trust, answers Expect: 100-continue, reads the body within the limits, hands the request to
// the router and writes one whole response or a chunked stream. Runs on its own strand.
//
// Every part of a request is bounded (http_framing.h: the header, the body (max_body_bytes), the
// bytes buffered at once, chunk extensions in all), and so is the time to send the request
// (read_timeout_s); each write must finish within write_timeout_s.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "container/http_framing.h"
#include "container/server_context.h"

namespace lmx::server {

using Request = boost::beast::http::request<boost::beast::http::string_body>;

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx);
  ~HttpSession();
  void run();

  // ---- for the router; all on this connection's strand ----
  ServerContext& ctx() { return ctx_; }
  boost::asio::any_io_executor executor() { return stream_.get_executor(); }
  const Request& request() const { return *request_; }
  // The request target's path (origin or absolute form), without the query.
  const std::string& path() const { return path_; }
  // Names the endpoint for metrics (set by the router before answering).
  void set_endpoint(std::string endpoint) { endpoint_ = std::move(endpoint); }

  // A whole response; to a HEAD request only its header (with the body's Content-Length).
  void respond(int status, std::string body, const std::string& content_type = "application/json",
               const std::string& allow = {});
  // A chunked response: the header goes out with the first write.
  void stream_begin(const std::string& content_type);
  void stream_write(std::string bytes);
  void stream_end();
  bool streaming() const { return streaming_; }
  // True once the client is known to be gone (a write failed or the connection was reset).
  bool gone() const { return gone_; }
  // Called once if the client disconnects before this request is answered.
  void on_disconnect(std::function<void()> fn);

 private:
  // What to do once a queued write has gone out.
  enum class After { Nothing, ReadBody, EndResponse };
  struct Out {
    std::string bytes;
    After after = After::Nothing;
    bool keep_alive = false;  // for EndResponse
  };

  void read_header();
  void on_header(boost::beast::error_code ec);
  void read_body();
  void on_body(boost::beast::error_code ec);
  void begin_request();
  void refuse_read_error(boost::beast::error_code ec);
  void refuse_unread(int status, const std::string& message, const std::string& field);
  void dispatch();
  void queue(Out out);
  void pump();
  void finish_request(int status);
  void queue_stream_head();
  void after_response(bool keep_alive);
  void linger_close();
  void linger_read();
  void watch_socket();
  void on_peer_eof();
  void check_peer(uint64_t seq);
  void mark_gone();

  boost::beast::tcp_stream stream_;
  ServerContext& ctx_;
  FramingLimits limits_;
  boost::beast::flat_buffer buffer_;
  std::optional<RequestReader> reader_;  // the request being read
  std::optional<Request> request_;
  std::string path_;
  std::string endpoint_;
  std::chrono::steady_clock::time_point started_;
  bool in_request_ = false;
  bool head_ = false;      // the request is HEAD: responses carry no body
  unsigned version_ = 11;  // the request's HTTP version (10 or 11)
  bool keep_alive_ = true;
  uint64_t request_seq_ = 0;
  bool gone_ = false;
  bool peer_eof_ = false;  // the client shut down its sending side
  std::function<void()> on_disconnect_;
  boost::asio::steady_timer peer_check_;

  // Writes: one at a time, in order.
  std::deque<Out> out_;
  bool writing_ = false;
  bool response_started_ = false;  // the response's header is queued or sent

  // Streaming state.
  bool streaming_ = false;
  bool end_queued_ = false;
  std::string stream_content_type_;

  std::array<char, 4096> linger_buf_{};
};

}  // namespace lmx::server
