#include "smoothquant/kv_calibration.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/backend/activation_observer.h"
#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/model/kv_scales.h"
#include "engine/tokenizer/tokenizer.h"
#include "smoothquant/calibration.h"
#include "smoothquant/smoothquant.h"

namespace lmx::smoothquant {
namespace {

constexpr float kE4m3Max = 448.0f;

// Per layer max |K| and max |V| of what the backend caches.
class KvRangeCollector final : public ActivationObserver {
 public:
  explicit KvRangeCollector(int layers) : ranges_(size_t(std::max(layers, 0))) {}
  void observe(int, LinearSlot, const InputSummary&) override {}
  void observe_kv(int layer, float k_abs_max, float v_abs_max) override {
    if (!std::isfinite(k_abs_max) || !std::isfinite(v_abs_max))
      throw_error(
          "KV cache calibration: layer {} computes a non-finite K or V value (max |K| {}, max "
          "|V| {}); the weights are broken or overflow the calibration dtype",
          layer, k_abs_max, v_abs_max);
    KvRange& r = ranges_.at(size_t(layer));
    r.k = std::max(r.k, k_abs_max);
    r.v = std::max(r.v, v_abs_max);
  }
  const std::vector<KvRange>& ranges() const { return ranges_; }

 private:
  std::vector<KvRange> ranges_;
};

std::vector<kernels::KvScale> fixed_scales(int layers, double value) {
  check_kv_scale(value, "option.kv_cache_scale");
  const float s = float(value);
  return std::vector<kernels::KvScale>(size_t(layers), kernels::KvScale{s, s});
}

}  // namespace

std::vector<KvRange> measure_kv_ranges(const LoadedModel& model, const CalibrationDevice& device,
                                       const std::vector<std::vector<int32_t>>& samples) {
  KvRangeCollector collector(model.desc.num_layers);
  const std::unique_ptr<Backend> backend =
      make_calibration_backend(model, device, collector, longest_sample(samples));
  run_calibration(*backend, samples);
  return collector.ranges();
}

float kv_scale_for(float abs_max) {
  if (!std::isfinite(abs_max) || abs_max < 0.0f)
    throw_error("KV cache calibration: max |value| {} is not a finite number", abs_max);
  const float ratio = abs_max * kKvScaleMargin / kE4m3Max;
  if (ratio <= 1.0f) return 1.0f;
  int e = 0;
  const float m = std::frexp(ratio, &e);  // ratio = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0f, m == 0.5f ? e - 1 : e);
}

std::vector<kernels::KvScale> calibrate_kv_scales(const LoadedModel& model,
                                                  const CalibrationDevice& device) {
  if (model.random_seed)
    throw_error(
        "option.kv_cache_dtype=fp8_e4m3: {} has random benchmark weights, so there is no "
        "checkpoint scale and nothing to calibrate; set option.kv_cache_scale to a number "
        "(1.0: no scaling)",
        model.dir.string());
  const Tokenizer tok = Tokenizer::from_model_dir(model.dir);
  const auto samples = make_samples(tok, default_calibration_text(), kKvSamples, kKvSampleTokens,
                                    model.desc.max_position_embeddings);
  if (samples.empty()) throw_error("KV cache calibration: the built-in text holds no tokens");
  size_t tokens = 0;
  for (const auto& s : samples) tokens += s.size();
  const auto started = std::chrono::steady_clock::now();
  const std::vector<KvRange> ranges = measure_kv_ranges(model, device, samples);
  std::vector<kernels::KvScale> scales;
  float k_max = 0.0f, v_max = 0.0f;
  for (const KvRange& r : ranges) {
    scales.push_back({kv_scale_for(r.k), kv_scale_for(r.v)});
    k_max = std::max(k_max, r.k);
    v_max = std::max(v_max, r.v);
  }
  lmx::logger().info(
      "KV cache calibration: {} samples ({} tokens) on {} in {:.1f} s; max |K| {:g}, max |V| {:g}",
      samples.size(), tokens, device.describe(model),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), k_max,
      v_max);
  return scales;
}

void choose_kv_scales(LoadedModel& model, const properties::ServingConfig& config) {
  if (config.kv_cache_dtype != properties::KvCacheDtype::Fp8E4m3) return;
  using Kind = properties::KvCacheScale::Kind;
  const properties::KvCacheScale& setting = config.kv_cache_scale;
  std::string source;
  if (setting.kind == Kind::Fixed) {
    model.kv_scales = fixed_scales(model.desc.num_layers, setting.value);
    source = "option.kv_cache_scale";
  } else {
    std::optional<std::vector<kernels::KvScale>> from_checkpoint;
    if (setting.kind == Kind::Auto && model.checkpoint)
      from_checkpoint = read_checkpoint_kv_scales(*model.checkpoint, model.desc,
                                                  model.architecture->tensor_names(model.desc));
    if (from_checkpoint) {
      model.kv_scales = std::move(*from_checkpoint);
      source = "the checkpoint";
    } else {
      model.kv_scales = calibrate_kv_scales(model, calibration_device(config));
      source = "calibration";
    }
  }
  lmx::logger().info("fp8 KV cache scales from {}: {}", source,
                     describe_kv_scales(model.kv_scales));
}

}  // namespace lmx::smoothquant
