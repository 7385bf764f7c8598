#include "smoothquant/calibration.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu_backend.h"
#include "engine/core/error.h"

namespace lmx::smoothquant {

StatsCollector::StatsCollector(int layers, int64_t keep_rows)
    : stats_(size_t(std::max(layers, 0))), keep_rows_(keep_rows) {}

void StatsCollector::observe(int layer, LinearSlot slot, const float* x, int rows, int in) {
  InputStats& s = stats_.at(size_t(layer))[size_t(slot)];
  if (s.in == 0) {
    s.in = in;
    s.abs_max.assign(size_t(in), 0.0f);
  }
  if (s.in != in) throw_error("calibration: layer {} input width changed ({} -> {})", layer, s.in, in);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < in; ++j)
      s.abs_max[size_t(j)] = std::max(s.abs_max[size_t(j)], std::fabs(x[int64_t(r) * in + j]));
  s.tokens += rows;
  if (slot != LinearSlot::Qkv && slot != LinearSlot::Up) return;
  const int64_t take = std::min<int64_t>(rows, keep_rows_ - s.kept());
  if (take > 0) s.rows.insert(s.rows.end(), x, x + take * in);
}

void run_calibration(const LoadedModel& model, const std::vector<std::vector<int32_t>>& samples,
                     ActivationObserver& observer, const CalibrationProgress& progress) {
  size_t longest = 1;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].empty()) throw_error("calibration sample {} has no tokens", i);
    if (samples[i].size() > size_t(model.desc.max_position_embeddings))
      throw_error("calibration sample {} has {} tokens, more than the model's {} positions", i,
                  samples[i].size(), model.desc.max_position_embeddings);
    longest = std::max(longest, samples[i].size());
  }
  const int block = 16;
  const int blocks = int((longest + block - 1) / block);
  const std::unique_ptr<Backend> backend = make_cpu_backend(model, {block, blocks}, observer);
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int b = 0; b < blocks; ++b) table[size_t(b)] = b;
  std::vector<float> logits;
  for (const std::vector<int32_t>& s : samples) {  // each sample alone from position 0
    BatchChunk c;
    c.tokens = s;
    c.block_table = std::span<const int32_t>(table).first((s.size() + block - 1) / block);
    backend->forward(std::span<const BatchChunk>(&c, 1), logits);
    if (progress) progress(size_t(&s - samples.data()) + 1, samples.size());
  }
}

std::vector<LayerStats> calibrate(const LoadedModel& model,
                                  const std::vector<std::vector<int32_t>>& samples,
                                  int64_t keep_rows, const CalibrationProgress& progress) {
  for (const LayerWeights<WeightRef>& l : model.weights.layers)
    if (l.qkv.quant.quantized() || l.up.quant.quantized())
      throw_error("calibration runs the unquantized model; {} is marked for int8",
                  l.qkv.weight.name);
  StatsCollector collector(model.desc.num_layers, keep_rows);
  run_calibration(model, samples, collector, progress);
  return collector.stats();
}

}  // namespace lmx::smoothquant
