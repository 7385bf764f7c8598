#include "container/plugin_loader.h"

#include <dlfcn.h>

#include <stdexcept>
#include <string_view>

#include <spdlog/spdlog.h>

namespace lmx::server {

namespace {

// The plugin's log lines, into this server's log (its default spdlog logger, its level).
void forward_plugin_log(void*, int32_t level, const char* message, size_t len) {
  spdlog::log(static_cast<spdlog::level::level_enum>(level), "{}", std::string_view(message, len));
}

template <typename Fn>
void resolve(void* lib, const std::string& path, const char* name, Fn& out) {
  dlerror();
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    throw std::runtime_error("plugin " + path + " does not export " + name);
  }
  out = reinterpret_cast<Fn>(sym);
}

}  // namespace

PluginApi PluginApi::load(const std::string& path) {
  PluginApi api;
  api.library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api.library == nullptr) {
    const char* why = dlerror();
    throw std::runtime_error("cannot load plugin " + path + ": " + (why ? why : "unknown error"));
  }
  resolve(api.library, path, "lmx_abi_version", api.abi_version);
  int32_t v = api.abi_version();
  if (v != LMX_ABI_VERSION) {
    throw std::runtime_error("plugin " + path + " has ABI version " + std::to_string(v) +
                             ", this server needs " + std::to_string(LMX_ABI_VERSION));
  }
  resolve(api.library, path, "lmx_last_error", api.last_error);
  resolve(api.library, path, "lmx_last_error_field", api.last_error_field);
  resolve(api.library, path, "lmx_set_log_callback", api.set_log_callback);
  try {
    api.route_logs();
  } catch (const std::exception& e) {
    throw std::runtime_error("plugin " + path + ": " + e.what());
  }
  resolve(api.library, path, "lmx_create", api.create);
  resolve(api.library, path, "lmx_predict", api.predict);
  resolve(api.library, path, "lmx_predict_stream", api.predict_stream);
  resolve(api.library, path, "lmx_cancel", api.cancel);
  resolve(api.library, path, "lmx_health", api.health);
  resolve(api.library, path, "lmx_free_string", api.free_string);
  resolve(api.library, path, "lmx_destroy", api.destroy);
  resolve(api.library, path, "lmx_process_rank", api.process_rank);
  resolve(api.library, path, "lmx_run_follower", api.run_follower);
  return api;
}

void PluginApi::route_logs() const {
  if (set_log_callback(&forward_plugin_log, nullptr, static_cast<int32_t>(spdlog::get_level())) !=
      LMX_STATUS_OK) {
    throw std::runtime_error(std::string("the plugin's lmx_set_log_callback failed: ") +
                             last_error());
  }
}

const char* model_state_name(ModelState s) {
  switch (s) {
    case ModelState::Loading:
      return "loading";
    case ModelState::Ready:
      return "ready";
    case ModelState::Failed:
      return "failed";
    case ModelState::Stopped:
      return "stopped";
  }
  return "unknown";
}

Model::Model(PluginApi api, std::string model_dir, std::string name)
    : api_(api), model_dir_(std::move(model_dir)), name_(std::move(name)) {}

Model::~Model() {
  // A load still in progress finishes first, so its handle is destroyed too.
  if (loader_ != nullptr) {
    loader_->join();
    delete loader_;
  }
  stop();
}

void Model::start_loading(const std::string& overrides_json) {
  loader_ = new std::thread([this, overrides_json] {
    lmx_handle* h = nullptr;
    lmx_status st = api_.create(model_dir_.c_str(),
                                overrides_json.empty() ? nullptr : overrides_json.c_str(), &h);
    if (st != LMX_STATUS_OK) {
      std::lock_guard lock(mu_);
      error_ = api_.last_error();
      spdlog::error("model {} failed to load (status {}): {}", model_dir_, st, error_);
      state_ = ModelState::Failed;
      return;
    }
    char* json = nullptr;
    nlohmann::json cfg = nlohmann::json::object();
    if (api_.health(h, &json) == LMX_STATUS_OK && json != nullptr) {
      auto j = nlohmann::json::parse(json, nullptr, false);
      if (j.is_object()) cfg = j.value("config", nlohmann::json::object());
    }
    api_.free_string(json);
    {
      std::lock_guard lock(mu_);
      handle_ = h;
      config_ = cfg;
    }
    state_ = ModelState::Ready;
    spdlog::info("model {} ready (output_formatter {})", model_dir_,
                 cfg.value("output_formatter", "json"));
  });
}

std::string Model::load_error() const {
  std::lock_guard lock(mu_);
  return error_;
}

nlohmann::json Model::health() const {
  if (state_ != ModelState::Ready) return nlohmann::json::object();
  char* json = nullptr;
  nlohmann::json out = nlohmann::json::object();
  if (api_.health(handle_, &json) == LMX_STATUS_OK && json != nullptr) {
    auto j = nlohmann::json::parse(json, nullptr, false);
    if (!j.is_discarded()) out = std::move(j);
  }
  api_.free_string(json);
  return out;
}

void Model::stop() {
  lmx_handle* h = nullptr;
  {
    std::lock_guard lock(mu_);
    h = handle_;
    handle_ = nullptr;
  }
  if (h != nullptr) {
    state_ = ModelState::Stopped;
    api_.destroy(h);
  }
}

}  // namespace lmx::server
