// serving.properties + environment -> one typed, validated ServingConfig that remembers where each
// value came from. The engine, the plugin and the server read only this struct.
//
//   auto env = lmx::properties::Environment::from_process();
//   auto cfg = lmx::properties::load_serving_config("/opt/ml/model", env,
//                                                   EngineCapabilities::this_build());
//
// Precedence, highest first: caller overrides (the plugin's create call), serving.properties,
// OPTION_*/SERVING_*, HF_MODEL_ID/HF_REVISION/TENSOR_PARALLEL_DEGREE/HF_TASK/HF_*TRUST_REMOTE_CODE,
// TGI-style aliases, defaults (LMI's, see docs/configuration.md).
// Any invalid value -> lmx::Error naming key, value, source and what is allowed (all problems in
// one message). Unknown keys -> warnings (ServingConfig::warnings, also logged with spdlog).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "properties/config_enums.h"
#include "properties/config_merge.h"
#include "properties/engine_capabilities.h"
#include "properties/env_source.h"
#include "properties/value_source.h"

namespace lmx::properties {

// option.kv_cache_scale: where the fp8 KV cache's per-layer dequantization scales come from
// (kernels/kv_dtype.h, docs/configuration.md).
struct KvCacheScale {
  enum class Kind {
    Auto,       // the checkpoint's k_scale / v_scale, else calibrated at load
    Calibrate,  // calibrated at load, whatever the checkpoint holds
    Fixed,      // `value` for every layer's K and V (1.0: no scaling)
  };
  Kind kind = Kind::Auto;
  double value = 1.0;  // Fixed only: positive, finite in fp32
};

struct ServingConfig {
  std::filesystem::path model_dir;   // the model store directory given to the loader
  std::string model_id;              // option.model_id as written ("" when unset)
  std::filesystem::path model_path;  // resolved local directory holding config.json + weights
  std::string revision;              // option.revision: accepted, unused (no downloads)

  int tensor_parallel_degree = 1;  // `max` already resolved to the GPU count
  int max_replicas = 1;  // whole-model copies; unset: as many as fit (visible GPUs / degree)
  Dtype dtype = Dtype::Auto;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::Auto;  // how the KV cache stores K and V
  KvCacheScale kv_cache_scale;                       // fp8 only: the cache's scales
  int max_tokens = 1024;  // prompt + generated tokens per request
  Quantize quantize = Quantize::None;  // option.dtype=int8 sets dynamic_int8 (LMI's spelling)
  std::optional<int> quantize_group_size;  // dynamic_int8: unset = per output channel
  std::optional<double> smoothquant_alpha;  // unset: searched during calibration
  std::string smoothquant_calibration_file;  // "" = the text built into LMX
  int smoothquant_calibration_samples = 128;  // windows of up to 512 tokens of that text
  RollingBatch rolling_batch = RollingBatch::Auto;
  int max_rolling_batch_size = 256;
  int max_rolling_batch_prefill_tokens = 4096;
  bool enable_cuda_graph = false;
  std::string task = "text-generation";
  Device device = Device::Cpu;  // option.device=auto resolved (cuda when a GPU is usable)
  OutputFormatter output_formatter = OutputFormatter::Json;
  bool trust_remote_code = false;  // accepted; meaningless here (no Python, no remote code)
  int model_loading_timeout_s = 1800;
  // Each request's deadline from its arrival (waiting included), in seconds; 0 = none. A request
  // past it ends with an error naming the key and its KV blocks are freed (engine/api/engine.h).
  int request_timeout_s = 0;
  std::string chat_template;     // a template file overriding the model's ("" = the model's)
  std::string tool_call_parser;  // hermes | llama3_json | mistral ("" = from the template)
  // The plugin's bound on one streaming request's chunks waiting for a slow stream callback;
  // past it the request is cancelled (plugin/stream_delivery.h).
  int max_stream_buffer_bytes = 1 << 20;

  // Server (non-option) keys.
  int job_queue_size = 1000;
  int batch_size = 1;
  int max_batch_delay_ms = 100;
  int chunked_read_timeout_s = 60;

  // Property key (e.g. "option.dtype", "job_queue_size") -> where its value came from. Holds every
  // key listed in known_keys().
  std::map<std::string, ValueSource> sources;
  // Keys nobody understands, with their winning raw values (also reported in `warnings`).
  std::map<std::string, std::string> unknown;
  std::vector<std::string> warnings;

  const ValueSource& source_of(const std::string& key) const;  // throws lmx::Error if not a key
};

// Reads model_dir/serving.properties when present, merges the environment, validates against
// `caps`. Throws lmx::Error on any invalid or unsupported value, or a missing model directory.
ServingConfig load_serving_config(const std::filesystem::path& model_dir, const Environment& env,
                                  const EngineCapabilities& caps,
                                  const std::vector<Override>& overrides = {});

// All property keys ServingConfig understands, canonical (lower-case) spelling.
const std::vector<std::string>& known_keys();

// {"model_dir": ..., "model_path": ..., "settings": {key: {"value", "source", "origin", "line",
//  "raw", "note"}}, "unknown": {...}, "warnings": [...]}
nlohmann::json to_json(const ServingConfig& config);

}  // namespace lmx::properties
