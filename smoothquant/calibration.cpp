#include "smoothquant/calibration.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend_factory.h"
#include "engine/core/error.h"

namespace lmx::smoothquant {
namespace {

constexpr int kBlock = 16;  // KV block size of a calibration backend

const char* slot_name(LinearSlot slot) {
  switch (slot) {
    case LinearSlot::Qkv:
      return "qkv";
    case LinearSlot::O:
      return "o";
    case LinearSlot::Up:
      return "up";
    case LinearSlot::Down:
      return "down";
  }
  return "?";
}

const char* dtype_name(CudaDtype d) {
  return d == CudaDtype::BF16 ? "bf16" : d == CudaDtype::F16 ? "fp16" : "fp32";
}

CudaDtype resolved_dtype(const CalibrationDevice& d, const LoadedModel& model) {
  return d.dtype.value_or(auto_cuda_dtype(model.config.dtype()));
}

}  // namespace

std::string CalibrationDevice::describe(const LoadedModel& model) const {
  if (!cuda) return "cpu (fp32)";
  return fmt::format("cuda:{} ({})", gpu, dtype_name(resolved_dtype(*this, model)));
}

StatsCollector::StatsCollector(int layers, int64_t keep_rows)
    : stats_(size_t(std::max(layers, 0))), keep_rows_(keep_rows) {}

int StatsCollector::rows_wanted(int layer, LinearSlot slot) const {
  if (slot != LinearSlot::Qkv && slot != LinearSlot::Up) return 0;
  const InputStats& s = stats_.at(size_t(layer))[size_t(slot)];
  return int(std::max<int64_t>(0, keep_rows_ - s.kept()));
}

void StatsCollector::observe(int layer, LinearSlot slot, const InputSummary& x) {
  InputStats& s = stats_.at(size_t(layer))[size_t(slot)];
  if (s.in == 0) {
    s.in = x.in;
    s.abs_max.assign(size_t(x.in), 0.0f);
  }
  if (s.in != x.in)
    throw_error("calibration: layer {} input width changed ({} -> {})", layer, s.in, x.in);
  for (size_t j = 0; j < size_t(x.in); ++j) {
    if (!std::isfinite(x.abs_max[j]))
      throw_error(
          "calibration: layer {}'s {} projection input has a non-finite value (column "
          "{}); the weights are broken or overflow the calibration dtype",
          layer, slot_name(slot), j);
    s.abs_max[j] = std::max(s.abs_max[j], x.abs_max[j]);
  }
  s.tokens += x.rows;
  const int64_t take = std::min<int64_t>(x.head_rows, keep_rows_ - s.kept());
  if (take > 0) s.rows.insert(s.rows.end(), x.head, x.head + take * x.in);
}

CudaBackendOptions calibration_cuda_options(CudaDtype dtype, int gpu, ActivationObserver& observer,
                                            int max_tokens, bool fused) {
  CudaBackendOptions o;
  o.dtype = dtype;
  o.kv_block_size = kBlock;
  o.kv_blocks = (std::max(max_tokens, 1) + kBlock - 1) / kBlock;
  o.max_step_tokens = std::max(max_tokens, 16);
  o.max_sequences = 1;
  o.fused = fused;
  o.fuse_decode_projections = false;  // the observer sees the model's own inputs and weights
  o.cuda_graphs = false;
  o.tune_gemms = false;
  o.first_device = gpu;
  o.observer = &observer;
  return o;
}

std::unique_ptr<Backend> make_calibration_backend(const LoadedModel& model,
                                                  const CalibrationDevice& device,
                                                  ActivationObserver& observer, int max_tokens) {
  if (!device.cuda) {
    const int blocks = (std::max(max_tokens, 1) + kBlock - 1) / kBlock;
    return make_cpu_backend(model, {kBlock, blocks}, observer);
  }
#if LMX_HAVE_CUDA_BACKEND
  const bool fused = model.architecture ? model.architecture->fused_policy : true;
  return cuda_backend_factory()(  // linked, or liblmx_cuda.so (the plugin)
      model, calibration_cuda_options(resolved_dtype(device, model), device.gpu, observer,
                                      max_tokens, fused));
#else
  throw_error("calibration on cuda: this build has no CUDA backend");
#endif
}

int longest_sample(const std::vector<std::vector<int32_t>>& samples) {
  size_t longest = 1;
  for (const auto& s : samples) longest = std::max(longest, s.size());
  return int(longest);
}

void run_calibration(Backend& backend, const std::vector<std::vector<int32_t>>& samples,
                     const CalibrationProgress& progress) {
  const DecoderDesc& desc = backend.desc();
  const KvCacheShape& kv = backend.kv_shape();
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].empty()) throw_error("calibration sample {} has no tokens", i);
    if (samples[i].size() > size_t(desc.max_position_embeddings))
      throw_error("calibration sample {} has {} tokens, more than the model's {} positions", i,
                  samples[i].size(), desc.max_position_embeddings);
    if (samples[i].size() > size_t(kv.num_blocks) * size_t(kv.block_size))
      throw_error("calibration sample {} has {} tokens, more than the backend's cache ({})", i,
                  samples[i].size(), size_t(kv.num_blocks) * size_t(kv.block_size));
  }
  std::vector<int32_t> table(static_cast<size_t>(kv.num_blocks));
  for (size_t b = 0; b < table.size(); ++b) table[b] = int32_t(b);
  std::vector<float> logits;
  for (const std::vector<int32_t>& s : samples) {  // each sample alone from position 0
    BatchChunk c;
    c.tokens = s;
    c.block_table = std::span<const int32_t>(table).first((s.size() + kv.block_size - 1) /
                                                          size_t(kv.block_size));
    backend.forward(std::span<const BatchChunk>(&c, 1), logits);
    if (progress) progress(size_t(&s - samples.data()) + 1, samples.size());
  }
}

Calibrator::Calibrator(const LoadedModel& model, const CalibrationDevice& device, int64_t keep_rows,
                       int max_tokens)
    : collector_(model.desc.num_layers, keep_rows) {
  for (const LayerWeights<WeightRef>& l : model.weights.layers)
    if (l.qkv.quant.quantized() || l.up.quant.quantized())
      throw_error("calibration runs the unquantized model; {} is marked for {}", l.qkv.weight.name,
                  l.qkv.quant.method());
  backend_ = make_calibration_backend(model, device, collector_, max_tokens);
}

void Calibrator::run(const std::vector<std::vector<int32_t>>& samples,
                     const CalibrationProgress& progress) {
  run_calibration(*backend_, samples, progress);
}

SmoothingScorer& Calibrator::scorer() {
  SmoothingScorer* s = backend_->smoothing_scorer();
  if (!s) throw_error("internal: the {} calibration backend has no alpha search", backend_->name());
  return *s;
}

}  // namespace lmx::smoothquant
