#include "properties/serving_config.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "engine/core/log.h"

namespace lmx::properties {
namespace {

namespace fs = std::filesystem;

// A key or value from outside as an error message quotes it: control bytes (a NUL would cut the
// message short wherever it crosses a C string) as \xNN, and at most 120 bytes of it.
std::string shown(std::string_view text) {
  constexpr size_t kMax = 120;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += char(c);
  }
  if (text.size() > kMax) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

const std::vector<std::string> kKnownKeys = {
    "option.model_id",
    "option.revision",
    "option.tensor_parallel_degree",
    "option.max_replicas",
    "option.dtype",
    "option.kv_cache_dtype",
    "option.kv_cache_scale",
    "option.max_tokens",
    "option.quantize",
    "option.quantize_group_size",
    "option.smoothquant_alpha",
    "option.smoothquant_calibration_file",
    "option.smoothquant_calibration_samples",
    "option.rolling_batch",
    "option.max_rolling_batch_size",
    "option.max_rolling_batch_prefill_tokens",
    "option.enable_cuda_graph",
    "option.task",
    "option.device",
    "option.output_formatter",
    "option.trust_remote_code",
    "option.model_loading_timeout",
    "option.request_timeout",
    "option.chat_template",
    "option.tool_call_parser",
    "option.max_stream_buffer_bytes",
    "job_queue_size",
    "batch_size",
    "max_batch_delay",
    "chunked_read_timeout",
};

// LMI/DJL settings that pick machinery LMX replaces (the Python/MPI engine, the handler module,
// DJL's model loading and JVM options via SERVING_LOAD_MODELS / SERVING_OPTS).
const std::vector<std::string> kIgnoredKeys = {"engine", "option.entrypoint", "load_models",
                                               "opts"};

// Tasks LMI/Hugging Face pipelines know; which ones run is EngineCapabilities::tasks.
const std::vector<std::string> kKnownTasks = {
    "text-generation", "text2text-generation", "feature-extraction",   "text-embedding",
    "fill-mask",       "text-classification",  "token-classification", "question-answering",
    "summarization",   "translation",
};

// Inference libraries LMI containers offer for option.rolling_batch; LMX is its own engine.
const std::vector<std::string> kOtherRollingBatch = {
    "vllm", "lmi-dist", "trtllm", "tensorrtllm", "deepspeed", "scheduler", "neuron", "lmi_dist"};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trim(std::string_view s) {
  const char* ws = " \t\f\r\n\v";
  const std::size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return "";
  const std::size_t e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::optional<long long> parse_integer(const std::string& t) {
  std::size_t i = 0;
  bool negative = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    negative = t[0] == '-';
    i = 1;
  }
  if (i == t.size()) return std::nullopt;
  long long v = 0;
  for (; i < t.size(); ++i) {
    if (t[i] < '0' || t[i] > '9') return std::nullopt;
    if (v > (LLONG_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + (t[i] - '0');
  }
  return negative ? -v : v;
}

std::optional<double> parse_number(const std::string& t) {
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const double x = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(x)) return std::nullopt;
  return x;
}

std::optional<bool> parse_bool(const std::string& t) {
  const std::string l = lower(t);
  if (l == "true") return true;
  if (l == "false") return false;
  return std::nullopt;
}

std::string range_text(long long lo, long long hi) {
  if (hi >= INT_MAX) return fmt::format("an integer >= {}", lo);
  return fmt::format("an integer from {} to {}", lo, hi);
}

// Levenshtein distance, for "did you mean" hints on unknown keys.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string suggestion_for(const std::string& key) {
  const std::string l = lower(key);
  if (contains(kKnownKeys, "option." + l)) return fmt::format("; did you mean option.{}?", l);
  if (l.rfind("option.", 0) == 0 && contains(kKnownKeys, l.substr(7)))
    return fmt::format("; did you mean {}?", l.substr(7));
  // The distance is at least the difference in length: keys whose lengths differ by more than
  // 2 are skipped without the O(|l| |k|) table (a long unknown key is then cheap, not quadratic).
  for (const std::string& k : kKnownKeys)
    if (l.size() <= k.size() + 2 && k.size() <= l.size() + 2 && edit_distance(l, k) <= 2)
      return fmt::format("; did you mean {}?", k);
  return "";
}

template <typename T>
struct Choice {
  const char* spelling;
  T value;
};

class Resolver {
 public:
  Resolver(MergedSettings merged, const Environment& env, const EngineCapabilities& caps,
           ServingConfig& cfg)
      : merged_(std::move(merged)), env_(env), caps_(caps), cfg_(cfg) {
    for (std::string& w : merged_.warnings) warnings_.push_back(std::move(w));
  }

  void run() {
    resolve_device();
    resolve_tensor_parallel();
    resolve_replicas();
    resolve_dtype();
    resolve_kv_cache_dtype();
    resolve_kv_cache_scale();
    resolve_quantization();
    resolve_batching();
    resolve_misc();
    resolve_model();
    resolve_chat();
    resolve_leftovers();
    cfg_.warnings = warnings_;
  }

  const std::vector<std::string>& errors() const { return errors_; }

 private:
  // The winning raw value of `key` (nullptr when unset); records its source in cfg.sources.
  const RawValue* take(const std::string& key) {
    taken_.insert(key);
    auto it = merged_.values.find(key);
    if (it == merged_.values.end()) {
      cfg_.sources[key] = ValueSource{};
      return nullptr;
    }
    cfg_.sources[key] = it->second.source;
    return &it->second;
  }

  void note(const std::string& key, std::string text) { cfg_.sources[key].note = std::move(text); }

  void invalid(const RawValue& v, std::string_view allowed) {
    failed_.insert(lower(v.key));
    errors_.push_back(fmt::format("invalid value '{}' for {} (from {}): allowed: {}", shown(v.text),
                                  shown(v.key), v.source.describe(), allowed));
  }

  void unsupported(const RawValue& v, std::string_view supported) {
    failed_.insert(lower(v.key));
    errors_.push_back(fmt::format(
        "{}={} (from {}) is a valid value but not supported by this build of LMX yet; this build "
        "supports: {}",
        shown(v.key), shown(v.text), v.source.describe(), supported));
  }

  // A value that is fine alone but conflicts with the rest of the configuration.
  void conflict(const std::string& key, const RawValue* v, std::string_view why) {
    failed_.insert(key);
    if (v != nullptr)
      errors_.push_back(
          fmt::format("{}={} (from {}): {}", shown(v->key), shown(v->text), v->source.describe(),
                      why));
    else
      errors_.push_back(fmt::format("{} (default): {}", key, why));
  }

  bool failed(const std::string& key) const { return failed_.count(key) != 0; }

  void int_key(const std::string& key, int& field, long long lo, long long hi = INT_MAX) {
    const RawValue* v = take(key);
    if (v == nullptr) return;
    const auto n = parse_integer(trim(v->text));
    if (!n || *n < lo || *n > hi) return invalid(*v, range_text(lo, hi));
    field = static_cast<int>(*n);
  }

  void bool_key(const std::string& key, bool& field) {
    const RawValue* v = take(key);
    if (v == nullptr) return;
    const auto b = parse_bool(trim(v->text));
    if (!b) return invalid(*v, "true, false");
    field = *b;
  }

  template <typename T>
  bool enum_value(const RawValue& v, const std::vector<Choice<T>>& choices, T& field,
                  std::string_view allowed) {
    const std::string t = lower(trim(v.text));
    for (const Choice<T>& c : choices) {
      if (t == c.spelling) {
        field = c.value;
        return true;
      }
    }
    invalid(v, allowed);
    return false;
  }

  template <typename T>
  static std::string names(const std::set<T>& values) {
    std::vector<std::string> out;
    for (T v : values) out.emplace_back(to_string(v));
    return fmt::format("{}", fmt::join(out, ", "));
  }

  void resolve_device() {
    const std::string key = "option.device";
    const RawValue* v = take(key);
    const int gpus = env_.gpu_count;
    const std::string requested = v != nullptr ? lower(trim(v->text)) : "auto";
    if (requested == "auto") {
      if (gpus > 0 && caps_.devices.count(Device::Cuda)) {
        cfg_.device = Device::Cuda;
        note(key, fmt::format("auto: {} visible GPU(s)", gpus));
      } else {
        cfg_.device = Device::Cpu;
        if (gpus > 0) {
          note(key, fmt::format("auto: {} visible GPU(s), but this build has no CUDA backend yet",
                                gpus));
          warnings_.push_back(fmt::format(
              "{} GPU(s) are visible but this build of LMX cannot use CUDA yet; running on cpu",
              gpus));
        } else {
          note(key, "auto: no GPU visible");
        }
      }
      return;
    }
    if (requested == "cpu") {
      cfg_.device = Device::Cpu;
      if (!caps_.devices.count(Device::Cpu)) unsupported(*v, names(caps_.devices));
    } else if (requested == "cuda" || requested == "gpu") {
      cfg_.device = Device::Cuda;
      if (!caps_.devices.count(Device::Cuda))
        unsupported(*v, "device " + names(caps_.devices));
      else if (gpus <= 0)
        conflict(key, v, "no GPU is visible to this process (check CUDA_VISIBLE_DEVICES)");
    } else {
      invalid(*v, "cpu, cuda, auto (cuda when a GPU is visible)");
    }
  }

  // Degree N or max. On cuda: one rank a GPU, up to the GPUs visible; on cpu: the CPU reference's
  // ranks as threads (max = 1). SageMaker sets SM_NUM_GPUS on every GPU host, so a degree that
  // comes only from that alias never stops the host from starting: where it cannot be used as
  // given it shrinks to what can (noted and warned), where an explicit setting would be an error.
  void resolve_tensor_parallel() {
    const std::string key = "option.tensor_parallel_degree";
    const RawValue* v = take(key);
    if (v == nullptr) return;
    const std::string t = lower(trim(v->text));
    const int gpus = env_.gpu_count;
    const bool cuda = cfg_.device == Device::Cuda;
    if (t == "max") {
      cfg_.tensor_parallel_degree = cuda ? std::max(1, gpus) : 1;
      note(key, cuda ? fmt::format("max = {} visible GPU(s)", gpus) : "max on device cpu = 1");
    } else {
      const auto n = parse_integer(t);
      if (!n || *n < 1 || *n > 65536)
        return invalid(*v, "a positive integer or max (all visible GPUs)");
      cfg_.tensor_parallel_degree = static_cast<int>(*n);
    }
    const int tp = cfg_.tensor_parallel_degree;
    const bool alias = v->source.kind == ValueSource::Kind::Alias;  // a GPU count: none on cpu
    const int limit = !cuda ? (caps_.cpu_tensor_parallel && !alias ? tp : 1)
                            : std::min(caps_.max_tensor_parallel_degree, std::max(1, gpus));
    if (tp <= limit) return;
    if (alias) {
      cfg_.tensor_parallel_degree = limit;
      const std::string why =
          fmt::format("{}={} is the host's GPU count (TGI alias); using degree {} ({})", v->key,
                      v->text, limit,
                      !cuda ? "device cpu"
                            : fmt::format("{} usable GPU(s), this build runs up to {} on cuda",
                                          gpus, caps_.max_tensor_parallel_degree));
      note(key, why);
      warnings_.push_back(why);
    } else if (!cuda) {
      unsupported(*v, "tensor_parallel_degree 1 on device cpu");
    } else if (tp > caps_.max_tensor_parallel_degree) {
      unsupported(*v, fmt::format("tensor_parallel_degree up to {} on cuda",
                                  caps_.max_tensor_parallel_degree));
    } else {
      conflict(key, v, fmt::format("only {} GPU(s) are visible to this process", gpus));
    }
  }

  // Whole-model copies, each on tensor_parallel_degree GPUs of its own. Default: as many as fit
  // (cuda: visible GPUs / degree; cpu: 1), and 1 in a process started by mpirun, whose group of
  // processes is one replica (the ranks are the processes). On cpu any count runs (copies of the
  // CPU reference).
  void resolve_replicas() {
    const std::string key = "option.max_replicas";
    const int tp = cfg_.tensor_parallel_degree, gpus = env_.gpu_count;
    const bool cuda = cfg_.device == Device::Cuda;
    const int processes = launcher_process_count(env_);
    const int fit = cuda && processes == 1 ? std::max(1, gpus / tp) : 1;
    const RawValue* v = take(key);
    if (v == nullptr) {
      cfg_.max_replicas = fit;
      if (fit > 1) note(key, fmt::format("as many as fit: {} GPU(s) / degree {}", gpus, tp));
      if (cuda && processes > 1)
        note(key, fmt::format("1: one replica a group of {} mpirun processes", processes));
      return;
    }
    const auto n = parse_integer(trim(v->text));
    if (!n || *n < 1 || *n > 4096) return invalid(*v, "a positive integer (whole-model copies)");
    cfg_.max_replicas = static_cast<int>(*n);
    if (cuda && cfg_.max_replicas * tp > std::max(1, gpus))
      conflict(key, v, fmt::format("{} replicas of tensor_parallel_degree {} need {} GPUs; {} are "
                                   "visible to this process", cfg_.max_replicas, tp,
                                   cfg_.max_replicas * tp, gpus));
  }

  void resolve_dtype() {
    const RawValue* v = take("option.dtype");
    if (v == nullptr) return;
    if (lower(trim(v->text)) == "int8") {  // LMI: int8 weights, 16-bit activations
      dtype_int8_ = v;
      cfg_.dtype = cfg_.device == Device::Cuda ? Dtype::Fp16 : Dtype::Fp32;
      note("option.dtype", fmt::format("int8 = option.quantize=dynamic_int8 with {} activations{}",
                                       to_string(cfg_.dtype),
                                       cfg_.device == Device::Cpu ? " (the CPU backend computes in fp32)" : ""));
      return;
    }
    static const std::vector<Choice<Dtype>> kChoices = {
        {"fp32", Dtype::Fp32},     {"float32", Dtype::Fp32}, {"fp16", Dtype::Fp16},
        {"float16", Dtype::Fp16},  {"half", Dtype::Fp16},    {"bf16", Dtype::Bf16},
        {"bfloat16", Dtype::Bf16}, {"auto", Dtype::Auto}};
    if (!enum_value(*v, kChoices, cfg_.dtype, "fp32, fp16, bf16, auto")) return;
    if (cfg_.dtype != Dtype::Auto && !caps_.dtypes.count(cfg_.dtype))
      unsupported(*v, "dtype " + names(caps_.dtypes) + ", auto");
    else if ((cfg_.dtype == Dtype::Fp16 || cfg_.dtype == Dtype::Bf16) && cfg_.device == Device::Cpu)
      conflict("option.dtype", v, "the CPU backend computes in fp32; fp16/bf16 need option.device=cuda");
  }

  // fp8 (OCP E4M3, per-layer scales: option.kv_cache_scale) halves the KV bytes; the CPU backend
  // emulates it by rounding each cached value, so it is valid on every device.
  void resolve_kv_cache_dtype() {
    const std::string key = "option.kv_cache_dtype";
    const RawValue* v = take(key);
    if (v == nullptr) return;
    static const std::vector<Choice<KvCacheDtype>> kChoices = {{"auto", KvCacheDtype::Auto},
                                                               {"fp8", KvCacheDtype::Fp8E4m3},
                                                               {"fp8_e4m3", KvCacheDtype::Fp8E4m3}};
    if (!enum_value(*v, kChoices, cfg_.kv_cache_dtype, "auto, fp8, fp8_e4m3")) return;
    if (cfg_.kv_cache_dtype == KvCacheDtype::Fp8E4m3 && cfg_.device == Device::Cpu)
      note(key, "fp8_e4m3 emulated on cpu: cached values rounded to E4M3, stored as fp32");
  }

  // option.kv_cache_scale (fp8 cache only): auto, calibrate, or one positive number for every
  // layer's K and V scale.
  void resolve_kv_cache_scale() {
    const std::string key = "option.kv_cache_scale";
    const RawValue* v = take(key);
    if (v == nullptr) return;
    const std::string text = lower(trim(v->text));
    KvCacheScale& out = cfg_.kv_cache_scale;
    if (text == "auto") {
      out.kind = KvCacheScale::Kind::Auto;
    } else if (text == "calibrate") {
      out.kind = KvCacheScale::Kind::Calibrate;
    } else {
      const auto x = parse_number(text);
      if (!x || !(*x > 0.0) || !(*x <= double(std::numeric_limits<float>::max())) ||
          float(*x) <= 0.0f)
        return invalid(*v,
                       "auto, calibrate, or a positive number (the scale of every layer's K "
                       "and V, e.g. 1.0)");
      out = {KvCacheScale::Kind::Fixed, *x};
    }
    if (!failed("option.kv_cache_dtype") && cfg_.kv_cache_dtype != KvCacheDtype::Fp8E4m3)
      conflict(key, v,
               "only used with option.kv_cache_dtype=fp8_e4m3 (the model-dtype cache has "
               "no scales)");
  }

  // What this build quantizes, by device: "quantize dynamic_int8 on cpu; none on cuda".
  std::string quantize_support() const {
    std::vector<std::string> parts;
    for (const Device d : caps_.devices) {
      const auto it = caps_.quantize.find(d);
      parts.push_back(fmt::format("{} on {}",
                                  it == caps_.quantize.end() || it->second.empty()
                                      ? "no quantization (option.quantize unset)"
                                      : "quantize " + names(it->second),
                                  to_string(d)));
    }
    return fmt::format("{}", fmt::join(parts, "; "));
  }

  void resolve_quantization() {
    const RawValue* q = take("option.quantize");
    if (q != nullptr) {
      static const std::vector<Choice<Quantize>> kChoices = {
          {"dynamic_int8", Quantize::DynamicInt8},
          {"smoothquant", Quantize::SmoothQuant},
          {"fp8", Quantize::Fp8},
          {"none", Quantize::None}};
      enum_value(*q, kChoices, cfg_.quantize, "dynamic_int8, smoothquant, fp8, none");
    }
    if (dtype_int8_ != nullptr && !failed("option.quantize")) {
      if (q != nullptr && cfg_.quantize != Quantize::DynamicInt8)
        conflict("option.dtype", dtype_int8_,
                 fmt::format("int8 means option.quantize=dynamic_int8, but option.quantize is {}",
                             q->text));
      else if (q == nullptr)
        note("option.quantize", fmt::format("dynamic_int8 from option.dtype=int8 ({})",
                                            dtype_int8_->source.describe()));
      cfg_.quantize = Quantize::DynamicInt8;
      warnings_.push_back(fmt::format(
          "option.dtype=int8 (from {}) is LMI's spelling of option.quantize=dynamic_int8 with {} "
          "activations",
          dtype_int8_->source.describe(), to_string(cfg_.dtype)));
    }
    const RawValue* asked = q != nullptr ? q : dtype_int8_;
    if (asked != nullptr && !failed(lower(asked->key)) && cfg_.quantize != Quantize::None) {
      const auto it = caps_.quantize.find(cfg_.device);
      if (it == caps_.quantize.end() || !it->second.count(cfg_.quantize))
        unsupported(*asked, quantize_support());
    }
    resolve_group_size();
    resolve_smoothquant();
  }

  // option.smoothquant_*: the alpha (unset: searched per layer), the calibration text (unset: the
  // one built into LMX; relative to the model directory) and how many samples of it calibrate.
  void resolve_smoothquant() {
    const auto only_smoothquant = [&](const std::string& key, const RawValue* v) {
      if (!failed("option.quantize") && cfg_.quantize != Quantize::SmoothQuant)
        conflict(key, v, "only used with option.quantize=smoothquant");
    };
    const std::string akey = "option.smoothquant_alpha";
    if (const RawValue* a = take(akey)) {
      const auto x = parse_number(trim(a->text));
      if (!x || *x < 0.0 || *x > 1.0) {
        invalid(*a, "a number from 0 to 1");
      } else {
        cfg_.smoothquant_alpha = *x;
        only_smoothquant(akey, a);
      }
    } else {
      note(akey, "unset: searched during calibration");
    }
    const std::string fkey = "option.smoothquant_calibration_file";
    if (const RawValue* f = take(fkey)) {
      fs::path p = trim(f->text);
      if (p.is_relative()) p = cfg_.model_dir / p;
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) {
        invalid(*f, fmt::format("a text file ({} is not a file)", p.string()));
      } else {
        cfg_.smoothquant_calibration_file = p.string();
        only_smoothquant(fkey, f);
      }
    } else if (cfg_.quantize == Quantize::SmoothQuant) {
      note(fkey, "unset: the calibration text built into LMX (smoothquant/calibration.txt)");
    }
    const std::string nkey = "option.smoothquant_calibration_samples";
    if (const RawValue* n = take(nkey)) {
      const auto v = parse_integer(trim(n->text));
      if (!v || *v < 1 || *v > 1000000) {
        invalid(*n, "an integer from 1 to 1000000");
      } else {
        cfg_.smoothquant_calibration_samples = int(*v);
        only_smoothquant(nkey, n);
      }
    }
  }

  // option.quantize_group_size: dynamic_int8's input columns per scale; whether it divides each
  // projection is checked when the model loads (engine/model/quantization.h).
  void resolve_group_size() {
    const std::string key = "option.quantize_group_size";
    const RawValue* v = take(key);
    if (v == nullptr) {
      if (cfg_.quantize == Quantize::DynamicInt8) note(key, "unset: one scale per output channel");
      return;
    }
    const auto n = parse_integer(trim(v->text));
    if (!n || !valid_quantize_group_size(*n)) return invalid(*v, kQuantizeGroupSizeAllowed);
    cfg_.quantize_group_size = static_cast<int>(*n);
    if (!failed("option.quantize") && cfg_.quantize != Quantize::DynamicInt8)
      conflict(key, v, "only used with option.quantize=dynamic_int8");
    else if (cfg_.device == Device::Cuda && *n < kCudaMinQuantizeGroupSize)
      conflict(key, v,
               "on option.device=cuda grouped int8 takes groups of 64 or more input "
               "columns (its kernels scale each 64-column step once)");
  }

  void resolve_batching() {
    const RawValue* rb = take("option.rolling_batch");
    if (rb != nullptr) {
      const std::string t = lower(trim(rb->text));
      if (contains(kOtherRollingBatch, t)) {
        invalid(*rb,
                "auto (LMX continuous batching), disable; LMX is its own engine and does not "
                "load other inference libraries");
      } else {
        static const std::vector<Choice<RollingBatch>> kChoices = {
            {"auto", RollingBatch::Auto},
            {"lmx", RollingBatch::Auto},
            {"disable", RollingBatch::Disable},
            {"false", RollingBatch::Disable}};
        if (enum_value(*rb, kChoices, cfg_.rolling_batch, "auto, disable") &&
            !caps_.rolling_batch.count(cfg_.rolling_batch))
          unsupported(*rb, "rolling_batch " + names(caps_.rolling_batch));
      }
    }
    int_key("option.max_rolling_batch_size", cfg_.max_rolling_batch_size, 1, 1 << 20);
    int_key("option.max_rolling_batch_prefill_tokens", cfg_.max_rolling_batch_prefill_tokens, 1);
    int_key("option.max_tokens", cfg_.max_tokens, 1);
    int_key("job_queue_size", cfg_.job_queue_size, 1);
    int_key("batch_size", cfg_.batch_size, 1, 1 << 20);
    int_key("max_batch_delay", cfg_.max_batch_delay_ms, 0);

    if (!failed("batch_size") && !failed("option.rolling_batch") && cfg_.batch_size > 1 &&
        cfg_.rolling_batch != RollingBatch::Disable) {
      conflict("batch_size", merged_value("batch_size"),
               "dynamic batching (batch_size > 1) cannot be combined with rolling batch; set "
               "option.rolling_batch=disable or batch_size=1");
    }
    if (cfg_.rolling_batch == RollingBatch::Auto &&
        cfg_.max_rolling_batch_size > cfg_.job_queue_size) {
      warnings_.push_back(fmt::format(
          "option.max_rolling_batch_size ({}) is larger than job_queue_size ({}); requests beyond "
          "the queue are rejected before the batch can fill",
          cfg_.max_rolling_batch_size, cfg_.job_queue_size));
    }
  }

  void resolve_misc() {
    const std::string gkey = "option.enable_cuda_graph";
    bool_key(gkey, cfg_.enable_cuda_graph);
    if (cfg_.enable_cuda_graph && !failed(gkey)) {
      const RawValue* g = merged_value(gkey);
      if (!caps_.cuda_graphs)
        unsupported(*g, "enable_cuda_graph=false");
      else if (cfg_.device != Device::Cuda)
        conflict(gkey, g, "CUDA graphs need option.device=cuda; the device is cpu");
    }

    if (const RawValue* t = take("option.task")) {
      const std::string task = lower(trim(t->text));
      if (!contains(kKnownTasks, task)) {
        invalid(*t, fmt::format("{}", fmt::join(kKnownTasks, ", ")));
      } else {
        cfg_.task = task;
        if (!caps_.tasks.count(task))
          unsupported(*t, fmt::format("task {}", fmt::join(caps_.tasks, ", ")));
      }
    }

    if (const RawValue* f = take("option.output_formatter")) {
      static const std::vector<Choice<OutputFormatter>> kChoices = {
          {"json", OutputFormatter::Json},
          {"jsonlines", OutputFormatter::JsonLines},
          {"sse", OutputFormatter::Sse}};
      enum_value(*f, kChoices, cfg_.output_formatter, "json, jsonlines, sse");
    }

    const std::string rkey = "option.trust_remote_code";
    bool_key(rkey, cfg_.trust_remote_code);
    if (cfg_.trust_remote_code) {
      warnings_.push_back(
          "option.trust_remote_code=true is accepted but meaningless in LMX: no code from the "
          "model repository is ever run (architectures are built in)");
      note(rkey, "meaningless in LMX: no model code is run");
    }

    int_key("option.model_loading_timeout", cfg_.model_loading_timeout_s, 1);
    int_key("option.request_timeout", cfg_.request_timeout_s, 0);
    int_key("option.max_stream_buffer_bytes", cfg_.max_stream_buffer_bytes, 1);
    int_key("chunked_read_timeout", cfg_.chunked_read_timeout_s, 1);
    // DJL's timeout for the next chunk of a streamed response: lmx-server does not implement it,
    // so an explicit value is refused rather than ignored (the default is reported as without
    // effect by lmx config).
    if (const RawValue* v = merged_value("chunked_read_timeout");
        v != nullptr && v->source.kind != ValueSource::Kind::Default && !failed("chunked_read_timeout"))
      conflict("chunked_read_timeout", v,
               "chunked_read_timeout is not supported by LMX: lmx-server has no timeout for the "
               "next chunk of a streamed response; remove the setting");
  }

  void resolve_model() {
    const std::string key = "option.model_id";
    const RawValue* v = take(key);
    cfg_.model_id = v != nullptr ? trim(v->text) : "";
    std::error_code ec;
    if (cfg_.model_id.empty()) {
      cfg_.model_path = cfg_.model_dir;
      note(key, "unset: the model directory itself");
    } else if (cfg_.model_id.find("://") != std::string::npos) {
      conflict(key, v,
               "option.model_id must be a local directory; LMX does not download models (s3://, "
               "https://): download the model and point option.model_id or the model directory "
               "at it");
    } else {
      fs::path p = cfg_.model_id;
      if (p.is_relative()) p = cfg_.model_dir / p;
      if (fs::is_directory(p, ec)) {
        cfg_.model_path = fs::weakly_canonical(p, ec);
        if (ec) cfg_.model_path = p;
      } else if (fs::path(cfg_.model_id).is_relative()) {
        conflict(key, v,
                 fmt::format("{} is not a directory; option.model_id must be a local directory "
                             "(relative paths are taken from the model directory); Hugging Face "
                             "Hub ids are not downloaded by LMX",
                             p.string()));
      } else {
        conflict(key, v, fmt::format("directory {} does not exist", p.string()));
      }
    }

    if (const RawValue* r = take("option.revision")) {
      cfg_.revision = trim(r->text);
      if (!cfg_.revision.empty())
        warnings_.push_back(fmt::format(
            "option.revision={} (from {}) is ignored: LMX loads models from local directories only",
            cfg_.revision, r->source.describe()));
    }
  }

  void resolve_leftovers() {
    for (const std::string& key : kIgnoredKeys) {
      taken_.insert(key);
      auto it = merged_.values.find(key);
      if (it == merged_.values.end()) continue;
      const RawValue& v = it->second;
      warnings_.push_back(fmt::format(
          "{}={} (from {}) is ignored: LMX runs its own native engine in-process, not DJL's", v.key,
          v.text, v.source.describe()));
    }
    for (const auto& [key, v] : merged_.values) {
      if (taken_.count(key)) continue;
      cfg_.unknown[v.key] = v.text;
      warnings_.push_back(fmt::format("unknown key {} (from {}) is ignored{}", v.key,
                                      v.source.describe(), suggestion_for(v.key)));
    }
  }

  // option.chat_template: a template file overriding the model's (relative to the model
  // directory); option.tool_call_parser: the format of tool calls in generated text.
  void resolve_chat() {
    if (const RawValue* t = take("option.chat_template")) {
      fs::path p = trim(t->text);
      if (p.is_relative()) p = cfg_.model_dir / p;
      std::error_code ec;
      if (!fs::is_regular_file(p, ec))
        conflict("option.chat_template", t, fmt::format("{} is not a file", p.string()));
      else
        cfg_.chat_template = p.string();
    }
    if (const RawValue* t = take("option.tool_call_parser")) {
      const std::string name = lower(trim(t->text));
      if (name != "auto" && name != "hermes" && name != "llama3_json" && name != "mistral")
        invalid(*t, "auto (from the chat template), hermes, llama3_json, mistral");
      else
        cfg_.tool_call_parser = name == "auto" ? "" : name;
    }
  }

  const RawValue* merged_value(const std::string& key) const {
    auto it = merged_.values.find(key);
    return it == merged_.values.end() ? nullptr : &it->second;
  }

  MergedSettings merged_;
  const Environment& env_;
  const EngineCapabilities& caps_;
  ServingConfig& cfg_;
  const RawValue* dtype_int8_ = nullptr;  // option.dtype=int8 (LMI), resolved with quantize
  std::set<std::string> taken_;
  std::set<std::string> failed_;
  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
};

std::string canonical_key(const std::string& key) {
  const std::string l = lower(key);
  if (contains(kKnownKeys, l) || contains(kIgnoredKeys, l)) return l;
  return key;
}

}  // namespace

const std::vector<std::string>& known_keys() { return kKnownKeys; }

const ValueSource& ServingConfig::source_of(const std::string& key) const {
  auto it = sources.find(key);
  if (it == sources.end()) throw_error("{} is not a configuration key LMX knows", key);
  return it->second;
}

ServingConfig load_serving_config(const fs::path& model_dir, const Environment& env,
                                  const EngineCapabilities& caps,
                                  const std::vector<Override>& overrides) {
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec))
    throw_error("model directory {} does not exist or is not a directory", model_dir.string());

  ServingConfig cfg;
  cfg.model_dir = fs::weakly_canonical(fs::absolute(model_dir), ec);
  if (ec) cfg.model_dir = model_dir;

  std::optional<PropertiesFile> file;
  const fs::path props = cfg.model_dir / "serving.properties";
  if (fs::exists(props, ec)) file = PropertiesFile::load(props);

  MergedSettings merged =
      merge_sources(overrides, file ? &*file : nullptr, map_environment(env), canonical_key);
  Resolver resolver(std::move(merged), env, caps, cfg);
  resolver.run();

  const std::vector<std::string>& errors = resolver.errors();
  if (errors.size() == 1) throw Error(errors.front());
  if (!errors.empty())
    throw Error(fmt::format("{} configuration errors:\n  - {}", errors.size(),
                            fmt::join(errors, "\n  - ")));
  for (const std::string& w : cfg.warnings) lmx::logger().warn("config: {}", w);
  return cfg;
}

}  // namespace lmx::properties
