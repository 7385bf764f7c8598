#include "container/listener.h"

#include <sys/resource.h>

#include <algorithm>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "container/http_session.h"

namespace lmx::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
constexpr auto kMinBackoff = std::chrono::milliseconds(10);
constexpr auto kMaxBackoff = std::chrono::milliseconds(1000);
constexpr auto kCapPoll = std::chrono::milliseconds(20);

// Descriptors kept for everything but connections: model files, the plugin's libraries, logs.
rlim_t reserve(rlim_t limit) { return 64 + limit / 8; }

}  // namespace

int connection_cap(int requested) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return requested;
  // Raise the soft limit only as far as the connections and the reserve need (a huge limit
  // slows programs that close every descriptor up to it).
  rlim_t want = (static_cast<rlim_t>(requested) + 64) * 8 / 7 + 1;
  if (lim.rlim_cur < want) {
    rlimit raised = lim;
    raised.rlim_cur = std::min(want, lim.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  rlim_t soft = std::min<rlim_t>(lim.rlim_cur, 1 << 30);
  int fit = soft > reserve(soft) ? static_cast<int>(soft - reserve(soft)) : 1;
  if (requested > fit) {
    spdlog::warn("--max-connections {} lowered to {}: the descriptor limit is {}", requested, fit,
                 static_cast<unsigned long long>(soft));
    return fit;
  }
  return requested;
}

Listener::Listener(net::io_context& ioc, tcp::endpoint ep, ServerContext& ctx)
    : ioc_(ioc), acceptor_(net::make_strand(ioc)), timer_(acceptor_.get_executor()), ctx_(ctx) {
  acceptor_.open(ep.protocol());
  acceptor_.set_option(net::socket_base::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen(net::socket_base::max_listen_connections);
}

void Listener::accept() {
  if (closed_) return;
  int64_t open = ctx_.metrics.open_connections().load();
  if (open >= ctx_.options.max_connections) {
    uint64_t held_back = 0;
    if (cap_log_.allow(held_back)) {
      spdlog::warn(
          "connection limit reached: {} connections open (--max-connections {}); new "
          "connections wait in the listen backlog until one closes ({} more times since the "
          "last line)",
          open, ctx_.options.max_connections, held_back);
    }
    return retry_after(kCapPoll);
  }
  acceptor_.async_accept(
      net::make_strand(ioc_),
      [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || self->closed_) return;
        if (ec) return self->on_error(ec);
        self->backoff_ = std::chrono::milliseconds(0);
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<HttpSession>(std::move(socket), self->ctx_)->run();
        self->accept();
      });
}

// Every accept error pauses before the next try: a pending connection that cannot be accepted
// (no descriptor left) keeps the listening socket ready, so retrying at once would spin.
void Listener::on_error(const boost::system::error_code& ec) {
  backoff_ = std::clamp(backoff_ * 2, std::chrono::milliseconds(kMinBackoff), kMaxBackoff);
  uint64_t held_back = 0;
  if (error_log_.allow(held_back)) {
    spdlog::warn(
        "accept failed: {} ({} open connections; {} more failures since the last line); "
        "retrying in {} ms",
        ec.message(), ctx_.metrics.open_connections().load(), held_back, backoff_.count());
  }
  retry_after(backoff_);
}

void Listener::retry_after(std::chrono::milliseconds pause) {
  timer_.expires_after(pause);
  timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->accept();
  });
}

void Listener::close() {
  net::post(acceptor_.get_executor(), [self = shared_from_this()] {
    self->closed_ = true;
    boost::system::error_code ignored;
    self->acceptor_.close(ignored);
    self->timer_.cancel();
  });
}

}  // namespace lmx::server
