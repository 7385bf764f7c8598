#include "plugin/handle.h"

#include <fmt/format.h>

#include "plugin/include/lmx/plugin.h"
#include "plugin/json_bounds.h"

namespace lmx::plugin {

using nlohmann::json;

std::vector<properties::Override> parse_overrides(const char* overrides_json) {
  std::vector<properties::Override> out;
  if (overrides_json == nullptr || *overrides_json == '\0') return out;
  json j;
  if (json_bounds::parse(overrides_json, j) != json_bounds::ParseStatus::Ok ||
      !(j.is_object() || j.is_null())) {
    throw Error("overrides_json must be a JSON object of property keys to values");
  }
  if (j.is_null()) return out;
  for (const auto& [key, v] : j.items()) {
    std::string text;
    if (v.is_string()) {
      text = v.get<std::string>();
    } else if (v.is_number() || v.is_boolean()) {
      text = v.dump();
    } else {
      throw Error(fmt::format("overrides_json: value of '{}' must be a string, number or boolean",
                              json_bounds::clip(key)));
    }
    out.push_back({key, text, "override"});
  }
  return out;
}

void Handle::begin_call() {
  std::lock_guard lock(calls_mu_);
  ++calls_;
}

void Handle::end_call() {
  std::lock_guard lock(calls_mu_);
  if (--calls_ == 0) calls_cv_.notify_all();
}

void Handle::wait_for_calls() {
  std::unique_lock lock(calls_mu_);
  calls_cv_.wait(lock, [&] { return calls_ == 0; });
}

json health_json(const Handle& h) {
  const auto& cfg = h.engine->config();
  json engine = h.engine->stats();
  std::string state = h.shutting_down ? "shutting_down" : "ready";
  if (engine.is_object() && engine.contains("state") && engine["state"].is_string() &&
      !h.shutting_down) {
    state = engine["state"].get<std::string>();
  }
  std::string name = cfg.model_path.filename().string();
  if (name.empty()) name = cfg.model_path.parent_path().filename().string();
  return json{{"state", state},
              {"abi_version", LMX_ABI_VERSION},
              {"model",
               {{"name", name},
                {"model_dir", cfg.model_dir.string()},
                {"model_path", cfg.model_path.string()},
                {"model_id", cfg.model_id}}},
              {"config",
               {{"output_formatter", std::string(properties::to_string(cfg.output_formatter))},
                {"max_tokens", cfg.max_tokens},
                {"job_queue_size", cfg.job_queue_size},
                {"max_rolling_batch_size", cfg.max_rolling_batch_size},
                {"chunked_read_timeout", cfg.chunked_read_timeout_s},
                {"max_stream_buffer_bytes", cfg.max_stream_buffer_bytes},
                {"device", std::string(properties::to_string(cfg.device))},
                {"dtype", std::string(properties::to_string(cfg.dtype))},
                {"kv_cache_dtype", std::string(properties::to_string(cfg.kv_cache_dtype))},
                {"tensor_parallel_degree", cfg.tensor_parallel_degree},
                {"task", cfg.task},
                {"chat_template",
                 h.chat && h.chat->load_error.empty() ? json(h.chat->source) : json(nullptr)},
                {"tool_call_parser", h.chat && !h.chat->tool_call_parser.empty()
                                         ? json(h.chat->tool_call_parser)
                                         : json(nullptr)}}},
              {"streams", h.streams ? h.streams->stats() : json(nullptr)},
              {"engine", engine}};
}

}  // namespace lmx::plugin
