#include "plugin/log_sink.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include <fmt/format.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/sink.h>

#include "engine/core/error.h"
#include "engine/core/log.h"

namespace lmx::plugin {
namespace {

thread_local bool t_in_log_callback = false;

// Hands each line to the host's callback (level, message without a newline) or writes
// "lmx [level] message" to standard error. Lines logged while this thread is inside the host's
// callback (by an lmx_* call made from there, which is refused but may log) are dropped: passing
// them on would call the callback re-entrantly, or deadlock against lmx_set_log_callback.
class HostSink final : public spdlog::sinks::sink {
 public:
  void log(const spdlog::details::log_msg& msg) override {
    if (t_in_log_callback) return;
    const std::string text(msg.payload.data(), msg.payload.size());
    std::shared_lock lock(mu_);  // many threads may log at once; set() waits for them
    if (callback_ == nullptr) {
      const auto level = spdlog::level::to_string_view(msg.level);
      const std::string line =
          fmt::format("lmx [{}] {}\n", std::string_view(level.data(), level.size()), text);
      std::fwrite(line.data(), 1, line.size(), stderr);
      return;
    }
    t_in_log_callback = true;
    try {
      callback_(user_data_, static_cast<int32_t>(msg.level), text.c_str(), text.size());
    } catch (...) {  // a C++ host's callback that throws: the line is lost, the engine is not
    }
    t_in_log_callback = false;
  }
  void flush() override { std::fflush(stderr); }
  void set_pattern(const std::string&) override {}  // the host formats its own lines
  void set_formatter(std::unique_ptr<spdlog::formatter>) override {}

  void set(lmx_log_callback callback, void* user_data) {
    std::unique_lock lock(mu_);
    callback_ = callback;
    user_data_ = user_data;
  }

 private:
  std::shared_mutex mu_;
  lmx_log_callback callback_ = nullptr;
  void* user_data_ = nullptr;
};

struct PluginLogger {
  std::shared_ptr<HostSink> sink = std::make_shared<HostSink>();
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>("lmx", sink);
  PluginLogger() {
    logger->set_level(spdlog::level::warn);
    lmx::set_logger(logger);  // not registered with spdlog: the host's registry stays its own
  }
};

PluginLogger& plugin_logger() {
  static auto* l = new PluginLogger();  // never freed: engine threads may log during exit
  return *l;
}

// When the library is loaded, before any engine code can log.
const bool g_installed = (install_plugin_logger(), true);

}  // namespace

void install_plugin_logger() { (void)plugin_logger(); }

void set_log_callback(lmx_log_callback callback, void* user_data, int32_t min_level) {
  if (min_level < LMX_LOG_TRACE || min_level > LMX_LOG_OFF)
    throw_error(
        "lmx_set_log_callback: min_level {} is not a level; use LMX_LOG_TRACE ({}) .. "
        "LMX_LOG_OFF ({})",
        min_level, LMX_LOG_TRACE, LMX_LOG_OFF);
  PluginLogger& l = plugin_logger();
  l.sink->set(callback, user_data);
  l.logger->set_level(static_cast<spdlog::level::level_enum>(min_level));
}

bool in_log_callback() { return t_in_log_callback; }

}  // namespace lmx::plugin
