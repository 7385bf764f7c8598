// dlopen()s the LMX plugin and resolves its C ABI. The server knows the engine only through this.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "plugin/include/lmx/plugin.h"

namespace lmx::server {

// Function pointers of plugin.h, resolved with dlsym.
struct PluginApi {
  void* library = nullptr;
  int32_t (*abi_version)(void) = nullptr;
  const char* (*last_error)(void) = nullptr;
  const char* (*last_error_field)(void) = nullptr;
  lmx_status (*set_log_callback)(lmx_log_callback, void*, int32_t) = nullptr;
  lmx_status (*create)(const char*, const char*, lmx_handle**) = nullptr;
  lmx_status (*predict)(lmx_handle*, const char*, char**) = nullptr;
  lmx_status (*predict_stream)(lmx_handle*, const char*, lmx_stream_callback, void*,
                               uint64_t*) = nullptr;
  lmx_status (*cancel)(lmx_handle*, uint64_t) = nullptr;
  lmx_status (*health)(lmx_handle*, char**) = nullptr;
  void (*free_string)(char*) = nullptr;
  lmx_status (*destroy)(lmx_handle*) = nullptr;
  lmx_status (*process_rank)(int32_t*, int32_t*) = nullptr;
  lmx_status (*run_follower)(const char*, const char*) = nullptr;

  // Throws std::runtime_error naming the path, the missing symbol or the ABI mismatch. The
  // plugin's log lines are routed into this server's spdlog logger at its level.
  static PluginApi load(const std::string& path);
  // Routes the plugin's log lines into this server's spdlog logger at its level now (after the
  // level changed). Throws std::runtime_error when the plugin refuses.
  void route_logs() const;
};

enum class ModelState { Loading, Ready, Failed, Stopped };
const char* model_state_name(ModelState s);

// The one model this server serves: loads it on a background thread so /ping can answer
// "loading" meanwhile.
class Model {
 public:
  Model(PluginApi api, std::string model_dir, std::string name);
  ~Model();

  void start_loading(const std::string& overrides_json);
  ModelState state() const { return state_.load(); }
  std::string load_error() const;
  const std::string& name() const { return name_; }
  const std::string& model_dir() const { return model_dir_; }
  const PluginApi& api() const { return api_; }
  lmx_handle* handle() const { return handle_; }  // non-null only when Ready

  // lmx_health as JSON ({} unless Ready).
  nlohmann::json health() const;
  // Cached settings of the loaded model (from lmx_health at load time).
  const nlohmann::json& config() const { return config_; }

  // Finishes all requests and frees the handle (idempotent).
  void stop();

 private:
  PluginApi api_;
  std::string model_dir_;
  std::string name_;
  std::atomic<ModelState> state_{ModelState::Loading};
  mutable std::mutex mu_;
  std::string error_;
  lmx_handle* handle_ = nullptr;
  nlohmann::json config_ = nlohmann::json::object();
  std::thread* loader_ = nullptr;
};

}  // namespace lmx::server
