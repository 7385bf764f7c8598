// Where the engine's own code logs (engine/, properties/, smoothquant/, plugin/):
//
//   lmx::logger().info("engine ready: {}", name);
//
// lmx::logger() is spdlog's default logger unless the program installed its own with
// set_logger(). The CLI and the tests leave the default. The plugin installs a logger of its own
// when it is loaded (plugin/log_sink.h), because spdlog is a shared library here: its default
// logger belongs to the whole process, so a plugin that logged through it would write to the
// host's stdout, and one that reconfigured it would change the host's own logging.
//
// Header-only: each program or shared object that links the engine has one instance (the plugin
// keeps it private with its version script).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <spdlog/logger.h>
#include <spdlog/spdlog.h>

namespace lmx {

namespace detail {
inline std::atomic<spdlog::logger*> g_logger{nullptr};
}  // namespace detail

inline spdlog::logger& logger() {
  spdlog::logger* l = detail::g_logger.load(std::memory_order_acquire);
  return l != nullptr ? *l : *spdlog::default_logger_raw();
}

namespace detail {
inline std::mutex g_logger_mu;
inline std::shared_ptr<spdlog::logger> g_logger_owner;  // the installed one, guarded by the mutex
}  // namespace detail

// What logger() returns, shared (to hand to code in another shared object of the engine: the
// plugin passes it to liblmx_cuda.so).
inline std::shared_ptr<spdlog::logger> shared_logger() {
  std::lock_guard lock(detail::g_logger_mu);
  return detail::g_logger_owner ? detail::g_logger_owner : spdlog::default_logger();
}

// Makes `l` what logger() returns from now on. Installed loggers are kept until the process ends:
// another thread may be writing to the previous one at this moment.
inline void set_logger(std::shared_ptr<spdlog::logger> l) {
  static auto* kept = new std::vector<std::shared_ptr<spdlog::logger>>();  // never freed
  std::lock_guard lock(detail::g_logger_mu);
  if (l == detail::g_logger_owner) return;
  kept->push_back(l);
  detail::g_logger_owner = l;
  detail::g_logger.store(l.get(), std::memory_order_release);
}

}  // namespace lmx
