#include "container/server.h"

#include <chrono>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "container/listener.h"

namespace lmx::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

int serve(ServerContext& ctx) {
  int threads = ctx.options.threads > 0
                    ? ctx.options.threads
                    : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  ctx.options.max_connections = connection_cap(ctx.options.max_connections);
  net::io_context ioc(threads);
  auto addr = net::ip::make_address(ctx.options.host);
  auto listener = std::make_shared<Listener>(
      ioc, tcp::endpoint(addr, static_cast<unsigned short>(ctx.options.port)), ctx);
  spdlog::info("lmx-server listening on {}:{} (model {} from {}; at most {} connections)",
               ctx.options.host, listener->port(), ctx.model->name(), ctx.model->model_dir(),
               ctx.options.max_connections);
  listener->accept();

  net::signal_set signals(ioc, SIGTERM, SIGINT);
  net::steady_timer drain_timer(ioc);
  std::chrono::steady_clock::time_point deadline;
  std::function<void()> poll_drain = [&] {
    // Requests being answered, and answers whose last bytes a slow client has not taken yet
    // (their write is bounded by option write_timeout_s).
    int64_t in_flight = ctx.metrics.in_flight().load() + ctx.unsent_responses.load();
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
    spdlog::info("signal {}: draining {} in-flight requests (up to {} s)", sig,
                 ctx.metrics.in_flight().load(), ctx.options.drain_timeout_s);
    ctx.draining = true;
    listener->close();
    deadline = std::chrono::steady_clock::now() + std::chrono::seconds(ctx.options.drain_timeout_s);
    poll_drain();
  });

  // Process 0 of an mpirun group does not serve a model that failed to load: the other processes
  // have failed too or wait for it in vain, and end when this process exits.
  int exit_code = 0;
  net::steady_timer load_watch(ioc);
  std::function<void()> watch_load = [&] {
    if (ctx.model->state() == ModelState::Failed) {
      spdlog::error("lmx-server: the model failed to load; process 0 of a tensor-parallel process "
                    "group exits (1) instead of serving without its ranks");
      exit_code = 1;
      listener->close();
      ioc.stop();
      return;
    }
    if (ctx.model->state() != ModelState::Loading) return;
    load_watch.expires_after(std::chrono::milliseconds(100));
    load_watch.async_wait([&](boost::system::error_code ec) {
      if (!ec) watch_load();
    });
  };
  if (ctx.options.exit_if_model_fails) watch_load();

  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { ioc.run(); });
  ioc.run();
  for (auto& t : pool) t.join();
  // Nothing is answered any more: finish what the engine still holds and free it.
  ctx.model->stop();
  spdlog::info("lmx-server stopped");
  return exit_code;
}

}  // namespace lmx::server
