#include "container/http_session.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstdio>
#include <iterator>
#include <sstream>

#include <spdlog/spdlog.h>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>

#include "container/http_rules.h"
#include "container/lmi_schema.h"
#include "container/routes.h"
#include "plugin/json_bounds.h"

namespace lmx::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr const char* kServerName = "lmx-server";
constexpr const char* kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// How long a closing connection keeps reading (and dropping) what the client still sends, so
// that the answer is not lost to a reset (RFC 9112 9.6).
constexpr auto kLinger = std::chrono::seconds(2);
// How often a half-closed client is checked for having gone entirely.
constexpr auto kPeerCheck = std::chrono::milliseconds(50);

template <typename Header>
std::string serialize(const Header& h) {
  std::ostringstream os;
  os << h;
  return os.str();
}

std::string chunk(const std::string& bytes) {
  char size[20];
  std::snprintf(size, sizeof(size), "%zx\r\n", bytes.size());
  return size + bytes + "\r\n";
}

}  // namespace

HttpSession::HttpSession(tcp::socket socket, ServerContext& ctx)
    : stream_(std::move(socket)),
      ctx_(ctx),
      limits_{.body = ctx.options.max_body_bytes},
      buffer_(limits_.buffer),
      peer_check_(stream_.get_executor()) {
  ctx_.metrics.open_connections().fetch_add(1);
}

HttpSession::~HttpSession() {
  for (const Out& out : out_)
    if (out.after == After::EndResponse) ctx_.unsent_responses.fetch_sub(1);
  ctx_.metrics.open_connections().fetch_sub(1);
}

void HttpSession::run() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
}

void HttpSession::read_header() {
  reader_.emplace(limits_);
  stream_.expires_after(std::chrono::seconds(ctx_.options.read_timeout_s));
  http::async_read_header(
      stream_, buffer_, reader_->parser(),
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
}

void HttpSession::on_header(beast::error_code ec) {
  if (client_gone(ec)) {
    beast::error_code ignored;
    stream_.socket().close(ignored);
    return;
  }
  begin_request();
  if (ec) return refuse_read_error(ec);
  const auto& h = reader_->parser().get();
  version_ = h.version();
  head_ = h.method() == http::verb::head;
  bool send_continue = false;
  if (auto refusal = reader_->check_header(send_continue)) {
    return refuse_unread(refusal->status, refusal->message, refusal->field);
  }
  if (send_continue) return queue(Out{kContinue, After::ReadBody});
  read_body();
}

void HttpSession::read_body() {
  if (reader_->parser().is_done()) return on_body({});
  stream_.expires_after(std::chrono::seconds(ctx_.options.read_timeout_s));
  http::async_read(
      stream_, buffer_, reader_->parser(),
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_body(ec); });
}

void HttpSession::on_body(beast::error_code ec) {
  if (client_gone(ec)) {
    // The client stopped sending mid-body: nobody is left to answer.
    keep_alive_ = false;
    finish_request(499);
    beast::error_code ignored;
    stream_.socket().close(ignored);
    return;
  }
  if (ec) return refuse_read_error(ec);
  request_.emplace(reader_->parser().release());
  dispatch();
}

void HttpSession::begin_request() {
  started_ = std::chrono::steady_clock::now();
  stream_.expires_never();
  ++request_seq_;
  in_request_ = true;
  ctx_.metrics.in_flight().fetch_add(1);
  gone_ = false;
  on_disconnect_ = nullptr;
  streaming_ = end_queued_ = response_started_ = head_ = false;
  version_ = 11;
  request_.reset();
  path_.clear();
  endpoint_ = "invalid";
}

// The answer to a request that broke a limit or the syntax while it was read.
void HttpSession::refuse_read_error(beast::error_code ec) {
  const Refusal refusal = reader_->refusal_for(ec);
  refuse_unread(refusal.status, refusal.message, refusal.field);
}

// An answer before (or instead of) reading the rest of the request: the connection cannot be
// reused, since the bytes that follow are not known to start a request.
void HttpSession::refuse_unread(int status, const std::string& message, const std::string& field) {
  keep_alive_ = false;
  endpoint_ = "invalid";
  respond(status, error_body(status, message, field));
}

void HttpSession::dispatch() {
  keep_alive_ = request_->keep_alive() && !ctx_.draining && !peer_eof_;
  path_ = request_path(std::string_view(request_->target().data(), request_->target().size()));
  endpoint_ = "unknown";
  stream_.expires_never();
  watch_socket();
  try {
    route(shared_from_this());
  } catch (const std::exception& e) {
    spdlog::error("internal error answering {}: {}", json_bounds::clip(path_), e.what());
    if (in_request_ && !streaming_) respond(500, error_body(500, "internal server error"));
  }
}

void HttpSession::respond(int status, std::string body, const std::string& content_type,
                          const std::string& allow) {
  if (!in_request_) return;
  if (streaming_) {
    // Nothing sent yet: the stream can still become a plain error response.
    if (response_started_) return;
    streaming_ = false;
  }
  http::response<http::string_body> res(static_cast<http::status>(status), version_);
  res.set(http::field::server, kServerName);
  res.set(http::field::content_type, content_type);
  if (!allow.empty()) res.set(http::field::allow, allow);
  // Every 503 (queue full, model loading, draining) is temporary: a client or load balancer
  // may try again after a second (RFC 9110 10.2.3).
  if (status == 503) res.set(http::field::retry_after, "1");
  if (ctx_.draining) keep_alive_ = false;
  res.keep_alive(keep_alive_);
  res.body() = std::move(body);
  res.prepare_payload();
  // A response to HEAD is the header GET would get (Content-Length included), no body.
  std::string bytes = head_ ? serialize(res.base()) : serialize(res);
  finish_request(status);
  response_started_ = true;
  queue(Out{std::move(bytes), After::EndResponse, keep_alive_});
}

void HttpSession::stream_begin(const std::string& content_type) {
  streaming_ = true;
  stream_content_type_ = content_type;
}

void HttpSession::stream_write(std::string bytes) {
  if (!streaming_ || end_queued_ || gone_ || bytes.empty()) return;  // "0" would end the stream
  queue_stream_head();
  queue(Out{chunk(bytes)});
}

void HttpSession::queue_stream_head() {
  if (response_started_) return;
  http::response<http::empty_body> head(http::status::ok, version_);
  head.set(http::field::server, kServerName);
  head.set(http::field::content_type, stream_content_type_);
  head.set(http::field::cache_control, "no-cache");
  head.chunked(true);
  if (ctx_.draining) keep_alive_ = false;
  head.keep_alive(keep_alive_);
  response_started_ = true;
  queue(Out{serialize(head.base())});
}

void HttpSession::stream_end() {
  if (!streaming_ || end_queued_) return;
  end_queued_ = true;
  if (gone_) {
    finish_request(499);
    return;
  }
  queue_stream_head();
  bool keep = keep_alive_;
  finish_request(200);
  queue(Out{"0\r\n\r\n", After::EndResponse, keep});
}

void HttpSession::queue(Out out) {
  if (out.after == After::EndResponse) ctx_.unsent_responses.fetch_add(1);
  out_.push_back(std::move(out));
  pump();
}

// One write at a time, in order; each must finish within write_timeout_s (a client that stops
// reading loses its connection, and its generation is cancelled).
void HttpSession::pump() {
  if (writing_ || out_.empty() || gone_) return;
  writing_ = true;
  stream_.expires_after(std::chrono::seconds(ctx_.options.write_timeout_s));
  net::async_write(stream_, net::buffer(out_.front().bytes),
                   [self = shared_from_this()](beast::error_code ec, std::size_t) {
                     self->writing_ = false;
                     Out done = std::move(self->out_.front());
                     self->out_.pop_front();
                     if (done.after == After::EndResponse) self->ctx_.unsent_responses.fetch_sub(1);
                     if (ec) {
                       if (ec == beast::error::timeout) {
                         spdlog::warn("closing a connection: a write took longer than {} s",
                                      self->ctx_.options.write_timeout_s);
                       }
                       // A request whose body was never read has no handler to end it.
                       if (done.after == After::ReadBody) self->finish_request(499);
                       return self->mark_gone();
                     }
                     if (done.after == After::ReadBody) self->read_body();
                     if (done.after == After::EndResponse) self->after_response(done.keep_alive);
                     self->pump();
                   });
}

void HttpSession::mark_gone() {
  if (gone_) return;
  gone_ = true;
  // Drop the unsent writes; one being written stays until its completion pops it.
  const auto unsent = writing_ ? std::next(out_.begin()) : out_.begin();
  for (auto it = unsent; it != out_.end(); ++it)
    if (it->after == After::EndResponse) ctx_.unsent_responses.fetch_sub(1);
  out_.erase(unsent, out_.end());
  beast::error_code ignored;
  stream_.socket().close(ignored);
  if (on_disconnect_) {
    auto fn = std::move(on_disconnect_);
    on_disconnect_ = nullptr;
    fn();
  }
  if (end_queued_) finish_request(499);
}

void HttpSession::on_disconnect(std::function<void()> fn) { on_disconnect_ = std::move(fn); }

// Notices a client that goes away while its request is being generated: waits until the socket
// is readable and peeks; an error means the client is gone, EOF that it shut down its sending
// side (on_peer_eof); a pipelined request is left in the socket for the next read.
void HttpSession::watch_socket() {
  if (buffer_.size() > 0 || peer_eof_) return;  // pipelined bytes already read: cannot tell
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
    if (peek_ec == net::error::eof || (!ec && !peek_ec && n == 0)) return self->on_peer_eof();
    if (ec || peek_ec) self->mark_gone();
  });
}

// EOF on a connection with a request in progress: the client either closed the connection or
// only shut down its sending side (a half-close, which HTTP allows). It is served either way;
// to learn which, an interim "100 Continue" (which an HTTP/1.1 client must accept) is sent
// unless the response has started: a closed socket answers it with a reset, seen by check_peer.
void HttpSession::on_peer_eof() {
  if (peer_eof_) return;
  peer_eof_ = true;
  keep_alive_ = false;
  if (version_ < 11) return mark_gone();  // no interim response to probe an HTTP/1.0 client
  if (!response_started_) queue(Out{kContinue});
  check_peer(request_seq_);
}

void HttpSession::check_peer(uint64_t seq) {
  peer_check_.expires_after(kPeerCheck);
  peer_check_.async_wait([self = shared_from_this(), seq](beast::error_code ec) {
    if (ec || seq != self->request_seq_ || !self->in_request_ || self->gone_) return;
    tcp_info info{};
    socklen_t len = sizeof(info);
    int fd = self->stream_.socket().native_handle();
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 || info.tcpi_state == TCP_CLOSE) {
      return self->mark_gone();
    }
    self->check_peer(seq);
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
  streaming_ = false;
  if (!keep_alive || gone_ || ctx_.draining || peer_eof_) return linger_close();
  read_header();
}

void HttpSession::linger_close() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(kLinger);
  linger_read();
}

void HttpSession::linger_read() {
  stream_.async_read_some(net::buffer(linger_buf_),
                          [self = shared_from_this()](beast::error_code ec, std::size_t) {
                            if (!ec) return self->linger_read();
                            beast::error_code ignored;
                            self->stream_.socket().close(ignored);
                          });
}

}  // namespace lmx::server
