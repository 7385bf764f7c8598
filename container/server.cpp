#include "container/server.h"

#include <chrono>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "container/http_session.h"

namespace lmx::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& ioc, tcp::endpoint ep, ServerContext& ctx)
      : ioc_(ioc), acceptor_(net::make_strand(ioc)), ctx_(ctx) {
    acceptor_.open(ep.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(net::socket_base::max_listen_connections);
  }
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void accept() {
    acceptor_.async_accept(
        net::make_strand(ioc_),
        [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
          if (ec) {
            if (ec != net::error::operation_aborted) {
              spdlog::warn("accept failed: {}", ec.message());
              self->accept();
            }
            return;
          }
          boost::system::error_code ignored;
          socket.set_option(tcp::no_delay(true), ignored);
          std::make_shared<HttpSession>(std::move(socket), self->ctx_)->run();
          self->accept();
        });
  }
  void close() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
      boost::system::error_code ignored;
      self->acceptor_.close(ignored);
    });
  }

 private:
  net::io_context& ioc_;
  tcp::acceptor acceptor_;
  ServerContext& ctx_;
};

}  // namespace

int serve(ServerContext& ctx) {
  int threads = ctx.options.threads > 0
                    ? ctx.options.threads
                    : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  net::io_context ioc(threads);
  auto addr = net::ip::make_address(ctx.options.host);
  auto listener = std::make_shared<Listener>(
      ioc, tcp::endpoint(addr, static_cast<unsigned short>(ctx.options.port)), ctx);
  spdlog::info("lmx-server listening on {}:{} (model {} from {})", ctx.options.host,
               listener->port(), ctx.model->name(), ctx.model->model_dir());
  listener->accept();

  net::signal_set signals(ioc, SIGTERM, SIGINT);
  net::steady_timer drain_timer(ioc);
  std::chrono::steady_clock::time_point deadline;
  std::function<void()> poll_drain = [&] {
    int64_t in_flight = ctx.metrics.in_flight().load();
    if (in_flight > 0 && std::chrono::steady_clock::now() < deadline) {
      drain_timer.expires_after(std::chrono::milliseconds(20));
      drain_timer.async_wait([&](boost::system::error_code) { poll_drain(); });
      return;
    }
    if (in_flight > 0) spdlog::warn("drain timeout: {} requests still in flight", in_flight);
    spdlog::info("drained; stopping");
    ioc.stop();
  };
  signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: draining in-flight requests (up to {} s)", sig,
                 ctx.options.drain_timeout_s);
    ctx.draining = true;
    listener->close();
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(ctx.options.drain_timeout_s);
    poll_drain();
  });

  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { ioc.run(); });
  ioc.run();
  for (auto& t : pool) t.join();
  // Nothing is answered any more: finish what the engine still holds and free it.
  ctx.blocking->join();
  ctx.model->stop();
  spdlog::info("lmx-server stopped");
  return 0;
}

}  // namespace lmx::server
