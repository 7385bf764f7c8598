#include "container/http_session.h"

#include <iterator>

#include <spdlog/spdlog.h>
#include <boost/asio/dispatch.hpp>

#include "container/lmi_schema.h"
#include "container/routes.h"

namespace lmx::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
constexpr const char* kServerName = "lmx-server";
}

HttpSession::HttpSession(tcp::socket socket, ServerContext& ctx)
    : stream_(std::move(socket)), ctx_(ctx) {}

void HttpSession::run() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
}

void HttpSession::do_read() {
  parser_.emplace();
  parser_->body_limit(ctx_.options.max_body_bytes);
  parser_->header_limit(64 * 1024);
  stream_.expires_after(std::chrono::seconds(ctx_.options.idle_timeout_s));
  http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->on_read(ec, n); });
}

void HttpSession::on_read(beast::error_code ec, std::size_t) {
  if (ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == beast::error::timeout ||
      ec == net::error::operation_aborted) {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    return;
  }
  started_ = std::chrono::steady_clock::now();
  stream_.expires_never();
  ++request_seq_;
  in_request_ = true;
  ctx_.metrics.in_flight().fetch_add(1);
  gone_ = false;
  on_disconnect_ = nullptr;
  streaming_ = header_sent_ = writing_ = end_queued_ = false;
  out_.clear();
  if (ec) {
    keep_alive_ = false;
    endpoint_ = "invalid";
    if (ec == http::error::body_limit) {
      respond(413, error_body(413,
                              "request body exceeds " +
                                  std::to_string(ctx_.options.max_body_bytes) + " bytes",
                              "body"));
    } else {
      respond(400, error_body(400, "malformed HTTP request: " + ec.message()));
    }
    return;
  }
  request_.emplace(parser_->release());
  keep_alive_ = request_->keep_alive() && !ctx_.draining;
  endpoint_ = "unknown";
  watch_socket();
  try {
    route(shared_from_this());
  } catch (const std::exception& e) {
    spdlog::error("internal error answering {}: {}", std::string(request_->target()), e.what());
    if (in_request_ && !streaming_) respond(500, error_body(500, "internal server error"));
  }
}

void HttpSession::respond(int status, std::string body, const std::string& content_type,
                          const std::string& allow) {
  if (!in_request_) return;
  if (streaming_) {
    // Nothing sent yet: the stream can still become a plain error response.
    if (header_sent_ || !out_.empty()) return;
    streaming_ = false;
  }
  auto res = std::make_shared<http::response<http::string_body>>(
      static_cast<http::status>(status), request_ ? request_->version() : 11);
  res->set(http::field::server, kServerName);
  res->set(http::field::content_type, content_type);
  if (!allow.empty()) res->set(http::field::allow, allow);
  if (ctx_.draining) keep_alive_ = false;
  res->keep_alive(keep_alive_);
  res->body() = std::move(body);
  res->prepare_payload();
  bool keep = keep_alive_;
  finish_request(status);
  http::async_write(stream_, *res,
                    [self = shared_from_this(), res, keep](beast::error_code ec, std::size_t) {
                      self->after_response(keep && !ec);
                    });
}

void HttpSession::stream_begin(const std::string& content_type) {
  streaming_ = true;
  stream_head_ =
      std::make_unique<http::response<http::empty_body>>(http::status::ok, request_->version());
  stream_head_->set(http::field::server, kServerName);
  stream_head_->set(http::field::content_type, content_type);
  stream_head_->set(http::field::cache_control, "no-cache");
  stream_head_->chunked(true);
}

void HttpSession::stream_write(std::string bytes) {
  if (!streaming_ || end_queued_ || gone_) return;
  out_.push_back(std::move(bytes));
  pump();
}

void HttpSession::stream_end() {
  if (!streaming_ || end_queued_) return;
  end_queued_ = true;
  if (gone_) {
    finish_request(499);
    return;
  }
  pump();
}

void HttpSession::pump() {
  if (writing_ || gone_) return;
  auto self = shared_from_this();
  if (!header_sent_) {
    if (ctx_.draining) keep_alive_ = false;
    stream_head_->keep_alive(keep_alive_);
    stream_serializer_ =
        std::make_unique<http::response_serializer<http::empty_body>>(*stream_head_);
    writing_ = true;
    http::async_write_header(stream_, *stream_serializer_,
                             [self](beast::error_code ec, std::size_t) {
                               self->writing_ = false;
                               if (ec) return self->mark_gone();
                               self->header_sent_ = true;
                               self->pump();
                             });
    return;
  }
  if (!out_.empty()) {
    writing_ = true;
    chunk_in_flight_ = true;
    net::async_write(stream_, http::make_chunk(net::buffer(out_.front())),
                     [self](beast::error_code ec, std::size_t) {
                       self->writing_ = false;
                       self->chunk_in_flight_ = false;
                       self->out_.pop_front();
                       if (ec) return self->mark_gone();
                       self->pump();
                     });
    return;
  }
  if (end_queued_ && in_request_) {
    writing_ = true;
    bool keep = keep_alive_;
    finish_request(200);
    net::async_write(stream_, http::make_chunk_last(),
                     [self, keep](beast::error_code ec, std::size_t) {
                       self->writing_ = false;
                       self->after_response(keep && !ec);
                     });
  }
}

void HttpSession::mark_gone() {
  if (gone_) return;
  gone_ = true;
  // Drop the unsent chunks; a chunk being written stays until its write completes (the write
  // reads its buffer, and its completion pops it).
  out_.erase(chunk_in_flight_ ? std::next(out_.begin()) : out_.begin(), out_.end());
  if (on_disconnect_) {
    auto fn = std::move(on_disconnect_);
    on_disconnect_ = nullptr;
    fn();
  }
  if (end_queued_) finish_request(499);
}

void HttpSession::on_disconnect(std::function<void()> fn) { on_disconnect_ = std::move(fn); }

// Notices a client that goes away while its request is being generated: waits until the socket
// is readable and peeks; EOF or an error means the client is gone (a pipelined request is left
// in the socket for the next read).
void HttpSession::watch_socket() {
  if (buffer_.size() > 0) return;  // pipelined bytes already read: cannot tell
  uint64_t seq = request_seq_;
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(),
                                                       seq](beast::error_code ec) {
    if (seq != self->request_seq_ || !self->in_request_) return;
    char c;
    beast::error_code peek_ec;
    std::size_t n = 0;
    if (!ec) {
      // Non-blocking: a spurious readiness must not block this connection's strand.
      self->stream_.socket().non_blocking(true, peek_ec);
      n = self->stream_.socket().receive(net::buffer(&c, 1), tcp::socket::message_peek, peek_ec);
      if (peek_ec == net::error::would_block || peek_ec == net::error::try_again) {
        return self->watch_socket();  // nothing there after all: keep watching
      }
    }
    if (ec || peek_ec || n == 0) self->mark_gone();
  });
}

void HttpSession::finish_request(int status) {
  if (!in_request_) return;
  in_request_ = false;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  ctx_.metrics.request_done(endpoint_, status, seconds);
  ctx_.metrics.in_flight().fetch_sub(1);
  on_disconnect_ = nullptr;
}

void HttpSession::after_response(bool keep_alive) {
  stream_serializer_.reset();
  stream_head_.reset();
  streaming_ = false;
  if (!keep_alive || gone_ || ctx_.draining) {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    return;
  }
  do_read();
}

}  // namespace lmx::server
