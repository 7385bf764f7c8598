// to_json(ServingConfig): every key with its typed value and where it came from.
#include "properties/serving_config.h"

namespace lmx::properties {
namespace {

nlohmann::json value_of(const ServingConfig& c, const std::string& key) {
  using nlohmann::json;
  if (key == "option.model_id") return c.model_id.empty() ? c.model_path.string() : c.model_id;
  if (key == "option.revision") return c.revision.empty() ? json() : json(c.revision);
  if (key == "option.tensor_parallel_degree") return c.tensor_parallel_degree;
  if (key == "option.max_replicas") return c.max_replicas;
  if (key == "option.dtype") return to_string(c.dtype);
  if (key == "option.kv_cache_dtype") return to_string(c.kv_cache_dtype);
  if (key == "option.kv_cache_scale") {
    switch (c.kv_cache_scale.kind) {
      case KvCacheScale::Kind::Auto:
        return "auto";
      case KvCacheScale::Kind::Calibrate:
        return "calibrate";
      case KvCacheScale::Kind::Fixed:
        return c.kv_cache_scale.value;
    }
  }
  if (key == "option.max_tokens") return c.max_tokens;
  if (key == "option.quantize")
    return c.quantize == Quantize::None ? json() : json(to_string(c.quantize));
  if (key == "option.quantize_group_size")
    return c.quantize_group_size ? json(*c.quantize_group_size) : json();
  if (key == "option.smoothquant_alpha")
    return c.smoothquant_alpha ? json(*c.smoothquant_alpha) : json();
  if (key == "option.smoothquant_calibration_file")
    return c.smoothquant_calibration_file.empty() ? json("built in")
                                                  : json(c.smoothquant_calibration_file);
  if (key == "option.smoothquant_calibration_samples") return c.smoothquant_calibration_samples;
  if (key == "option.rolling_batch") return to_string(c.rolling_batch);
  if (key == "option.max_rolling_batch_size") return c.max_rolling_batch_size;
  if (key == "option.max_rolling_batch_prefill_tokens") return c.max_rolling_batch_prefill_tokens;
  if (key == "option.enable_cuda_graph") return c.enable_cuda_graph;
  if (key == "option.task") return c.task;
  if (key == "option.device") return to_string(c.device);
  if (key == "option.output_formatter") return to_string(c.output_formatter);
  if (key == "option.trust_remote_code") return c.trust_remote_code;
  if (key == "option.model_loading_timeout") return c.model_loading_timeout_s;
  if (key == "option.request_timeout") return c.request_timeout_s;
  if (key == "option.chat_template")
    return c.chat_template.empty() ? json() : json(c.chat_template);
  if (key == "option.tool_call_parser")
    return c.tool_call_parser.empty() ? json("auto") : json(c.tool_call_parser);
  if (key == "option.max_stream_buffer_bytes") return c.max_stream_buffer_bytes;
  if (key == "job_queue_size") return c.job_queue_size;
  if (key == "batch_size") return c.batch_size;
  if (key == "max_batch_delay") return c.max_batch_delay_ms;
  if (key == "chunked_read_timeout") return c.chunked_read_timeout_s;
  return json();
}

// Whether the key's value changes what LMX does in this configuration, and why not when it does
// not ("" when it does). Every key the product accepts is listed: a setting is never silently
// ignored (docs/configuration.md).
std::string why_no_effect(const ServingConfig& c, const std::string& key) {
  const bool dynamic = c.rolling_batch == RollingBatch::Disable;
  if (key == "option.revision")
    return "no downloads: the model is read from the local directory as it is";
  if (key == "option.trust_remote_code") return "LMX runs no Python and no remote code";
  if (key.starts_with("option.smoothquant_") && c.quantize != Quantize::SmoothQuant)
    return "only used with option.quantize=smoothquant";
  if (key == "option.kv_cache_scale" && c.kv_cache_dtype != KvCacheDtype::Fp8E4m3)
    return "only used with option.kv_cache_dtype=fp8_e4m3";
  if (key == "option.quantize_group_size" && c.quantize != Quantize::DynamicInt8)
    return "only used with option.quantize=dynamic_int8";
  if (key == "option.max_rolling_batch_size" && dynamic)
    return "option.rolling_batch=disable: batch_size bounds each batch";
  if ((key == "batch_size" || key == "max_batch_delay") && !dynamic)
    return "only used with option.rolling_batch=disable (LMI's dynamic batching)";
  if (key == "option.enable_cuda_graph" && c.device != Device::Cuda) return "device cpu";
  if (key == "chunked_read_timeout")
    return "not supported: lmx-server has no timeout for the next chunk of a streamed response "
           "(an explicit value is refused at startup)";
  return "";
}

}  // namespace

nlohmann::json to_json(const ServingConfig& config) {
  nlohmann::json settings = nlohmann::json::object();
  for (const std::string& key : known_keys()) {
    nlohmann::json entry;
    entry["value"] = value_of(config, key);
    auto it = config.sources.find(key);
    const ValueSource src = it != config.sources.end() ? it->second : ValueSource{};
    entry["source"] = to_string(src.kind);
    entry["from"] = src.describe();
    if (!src.name.empty()) entry["origin"] = src.name;
    if (src.kind == ValueSource::Kind::File) entry["line"] = src.line;
    if (src.kind != ValueSource::Kind::Default) entry["raw"] = src.raw;
    if (!src.note.empty()) entry["note"] = src.note;
    const std::string why_not = why_no_effect(config, key);
    entry["takes_effect"] = why_not.empty();
    if (!why_not.empty()) entry["no_effect_because"] = why_not;
    settings[key] = std::move(entry);
  }
  nlohmann::json out;
  out["model_dir"] = config.model_dir.string();
  out["model_path"] = config.model_path.string();
  out["settings"] = std::move(settings);
  out["unknown"] = config.unknown;
  out["warnings"] = config.warnings;
  return out;
}

}  // namespace lmx::properties
