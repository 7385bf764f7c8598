// Accepts connections. Never spins: a failing accept() (EMFILE: out of descriptors, ENFILE,
// ENOBUFS, ...) is retried after a growing pause (10 ms doubling to 1 s), and at the connection
// cap (options.max_connections, kept below the descriptor limit) accepting pauses until a
// connection closes; new clients wait in the listen backlog meanwhile. Both are logged at most
// once per 5 s.
#pragma once

#include <chrono>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "container/log_throttle.h"
#include "container/server_context.h"

namespace lmx::server {

// Raises the soft descriptor limit (up to the hard one) to fit `requested` connections plus a
// reserve of 64 + 1/8 of the limit, and returns `requested`, lowered if the limit is too small.
int connection_cap(int requested);

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(boost::asio::io_context& ioc, boost::asio::ip::tcp::endpoint ep, ServerContext& ctx);
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void accept();
  void close();

 private:
  void retry_after(std::chrono::milliseconds pause);
  void on_error(const boost::system::error_code& ec);

  boost::asio::io_context& ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer timer_;
  ServerContext& ctx_;
  bool closed_ = false;
  std::chrono::milliseconds backoff_{0};
  LogThrottle error_log_{std::chrono::seconds(5)};
  LogThrottle cap_log_{std::chrono::seconds(5)};
};

}  // namespace lmx::server
