#include "smoothquant/smoothquant.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/tokenizer/tokenizer.h"
#include "smoothquant/cache.h"
#include "smoothquant/calibration_text.h"

namespace lmx::smoothquant {
namespace {

// Calibration progress: a line rewritten in place on a terminal (stderr), and in the log at
// every tenth of the samples (servers, whose stderr is a file).
CalibrationProgress progress_report() {
  const bool terminal = isatty(STDERR_FILENO) != 0;
  return [terminal, logged = size_t(0)](size_t done, size_t total) mutable {
    if (terminal) {
      std::fprintf(stderr, "\rsmoothquant: calibrating, sample %zu of %zu", done, total);
      if (done == total) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    }
    const size_t tenth = std::max<size_t>(1, total / 10);
    if (done == total || done / tenth > logged) {
      logged = done / tenth;
      lmx::logger().info("smoothquant: calibrated {} of {} samples", done, total);
    }
  };
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_error("the smoothquant calibration file {} cannot be read", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string describe_alphas(const Plan& p) {
  std::string s;
  for (const LayerPlan& l : p.layers) s += fmt::format("{}{:.1f}", s.empty() ? "" : " ", l.alpha);
  return s;
}

}  // namespace

const std::string& default_calibration_text() {
  static const std::string text(kCalibrationText);
  return text;
}

std::vector<std::vector<int32_t>> make_samples(const Tokenizer& tok, const std::string& text,
                                               int samples, int sample_tokens, int context) {
  const std::vector<int32_t> prefix = tok.encode("", true);
  const std::vector<int32_t> ids = tok.encode(text, false);
  const size_t window =
      size_t(std::min(sample_tokens, context)) - std::min(prefix.size(), size_t(context - 1));
  std::vector<std::vector<int32_t>> out;
  for (size_t at = 0; at < ids.size() && int(out.size()) < samples; at += window) {
    std::vector<int32_t> s = prefix;
    s.insert(s.end(), ids.begin() + ptrdiff_t(at),
             ids.begin() + ptrdiff_t(std::min(ids.size(), at + window)));
    out.push_back(std::move(s));
  }
  return out;
}

void check_samples(long long n, const char* what) {
  if (n < 1 || n > 1000000) throw_error("{} must be from 1 to 1000000, got {}", what, n);
}

Report apply(LoadedModel& model, const Settings& settings) {
  if (model.random_seed)
    throw_error("smoothquant calibrates real weights; {} has random benchmark weights",
                model.dir.string());
  if (settings.alpha && !(*settings.alpha >= 0.0 && *settings.alpha <= 1.0))
    throw_error("smoothquant alpha {} is not a number from 0 to 1", *settings.alpha);
  check_samples(settings.samples, "smoothquant calibration samples");
  const std::string text = settings.calibration_file.empty() ? default_calibration_text()
                                                             : read_text(settings.calibration_file);
  const std::string what = fmt::format(
      "samples={} tokens={} rows={} alpha={} device={}", settings.samples, kSampleTokens,
      kSearchRows, settings.alpha ? fmt::format("{}", *settings.alpha) : "search",
      settings.device.describe(model));
  Report r;
  const bool cached = settings.cache_dir != "-";
  if (cached) {
    r.cache_file = cache_file(settings.cache_dir.empty() ? default_cache_dir() : settings.cache_dir,
                              model.dir, text, what);
    if (std::optional<Plan> p = read_plan(r.cache_file, what)) {
      r.plan = std::move(*p);
      r.from_cache = true;
    }
  }
  if (!r.from_cache) {
    const Tokenizer tok = Tokenizer::from_model_dir(model.dir);
    const auto samples = make_samples(tok, text, settings.samples, kSampleTokens,
                                      model.desc.max_position_embeddings);
    if (samples.empty())
      throw_error("the smoothquant calibration text ({}) holds no tokens",
                  settings.calibration_file.empty() ? "built in" : settings.calibration_file);
    r.samples = int(samples.size());
    for (const auto& s : samples) r.tokens += int(s.size());
    const auto started = std::chrono::steady_clock::now();
    const auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    };
    lmx::logger().info("smoothquant: calibrating {} on {} samples ({} tokens) on {}",
                       model.dir.string(), r.samples, r.tokens, settings.device.describe(model));
    Calibrator calibrator(model, settings.device, kSearchRows, longest_sample(samples));
    const double loaded = seconds();
    calibrator.run(samples, progress_report());
    const double ran = seconds();
    r.plan = make_plan(model.desc, calibrator.stats(), settings.alpha, calibrator.scorer());
    r.seconds = seconds();
    lmx::logger().info(
        "smoothquant: calibrated in {:.1f} s (the 16-bit model loaded in {:.1f} s, the samples "
        "run in {:.1f} s, alpha {} in {:.1f} s)",
        r.seconds, loaded, ran - loaded, settings.alpha ? "set" : "searched", r.seconds - ran);
    if (cached) write_plan(r.cache_file, what, r.plan);
  }
  mark(model, r.plan);
  nlohmann::json alphas = nlohmann::json::array();
  for (const LayerPlan& l : r.plan.layers) alphas.push_back(l.alpha);
  model.quantization = {
      {"method", "smoothquant"},
      {"alphas", std::move(alphas)},
      {"alpha_searched", r.plan.searched},
      {"smoothing", r.plan.in_norm ? "folded into the norms" : "applied to the activations"},
      {"calibration", r.from_cache
                          ? nlohmann::json{{"from_cache", r.cache_file.string()}}
                          : nlohmann::json{{"samples", r.samples},
                                           {"tokens", r.tokens},
                                           {"device", settings.device.describe(model)},
                                           {"seconds", r.seconds},
                                           {"cached_in", cached ? r.cache_file.string() : ""}}}};
  lmx::logger().info("smoothquant: alpha per layer ({}): {}; smoothing {}; {} {}",
                     r.plan.searched ? "searched" : "fixed", describe_alphas(r.plan),
                     r.plan.in_norm ? "folded into the norms" : "applied to the activations",
                     r.from_cache ? "from the cache" : (cached ? "cached in" : "not cached"),
                     cached ? r.cache_file.string() : "");
  return r;
}

LoadedModel load_quantized_model(const std::filesystem::path& dir, const LinearQuant& quant,
                                 const std::optional<Settings>& smoothquant) {
  if (smoothquant && quant.quantized())
    throw_error("smoothquant and {} cannot be combined", quant.method());
  LoadedModel m = load_model(dir, quant);
  if (smoothquant && !m.quantization.is_null())
    throw_error(
        "{}: option.quantize=smoothquant quantizes F32, F16 or BF16 checkpoints; this one "
        "is already quantized ({})",
        dir.string(), m.quantization.dump());
  if (smoothquant) apply(m, *smoothquant);
  if (quant.quantized() && m.quantization.is_null()) {
    m.quantization = {{"method", quant.method()}};
    if (quant.kind == QuantKind::W8A16Grouped) m.quantization["group_size"] = quant.group;
  }
  return m;
}

std::optional<Settings> settings_from(const properties::ServingConfig& config) {
  if (config.quantize != properties::Quantize::SmoothQuant) return std::nullopt;
  Settings s;
  s.alpha = config.smoothquant_alpha;
  s.calibration_file = config.smoothquant_calibration_file;
  s.samples = config.smoothquant_calibration_samples;
  s.device = calibration_device(config);
  // The CPU backend calibrates split as it serves (each rank holding its slices); cuda on one GPU.
  if (!s.device.cuda) s.device.ranks = config.tensor_parallel_degree;
  return s;
}

CalibrationDevice calibration_device(const properties::ServingConfig& config) {
  CalibrationDevice d;
  d.cuda = config.device == properties::Device::Cuda;
  d.dtype = cuda_dtype_option(config.dtype);
  return d;
}

}  // namespace lmx::smoothquant
