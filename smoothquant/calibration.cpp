#include "smoothquant/calibration.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend_factory.h"
#include "engine/core/error.h"
#include "engine/model/shard.h"
#include "engine/parallel/rank_group.h"
#include "smoothquant/sharded_scorer.h"

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

KvCacheShape calibration_kv(int max_tokens) {
  return {kBlock, (std::max(max_tokens, 1) + kBlock - 1) / kBlock};
}

// The whole model's statistics from each rank's (rank order): qkv and up read every rank's whole
// input (the replicated hidden state), so rank 0's are the model's; o and down read each rank's
// slice of the columns (its heads, its intermediate slice, in rank order), joined.
std::vector<LayerStats> join_ranks(const std::vector<std::unique_ptr<StatsCollector>>& ranks) {
  std::vector<LayerStats> out = ranks[0]->stats();
  for (size_t l = 0; l < out.size(); ++l)
    for (const LinearSlot slot : {LinearSlot::O, LinearSlot::Down}) {
      InputStats& whole = out[l][size_t(slot)];
      for (size_t r = 1; r < ranks.size(); ++r) {
        const InputStats& part = ranks[r]->stats()[l][size_t(slot)];
        if (part.tokens != whole.tokens)
          throw_error("internal: tensor-parallel rank {} saw {} tokens at layer {}, rank 0 {}", r,
                      part.tokens, l, whole.tokens);
        whole.abs_max.insert(whole.abs_max.end(), part.abs_max.begin(), part.abs_max.end());
        whole.in += part.in;
      }
    }
  return out;
}

}  // namespace

std::string CalibrationDevice::describe(const LoadedModel& model) const {
  const std::string split = ranks > 1 ? fmt::format(" x {} ranks", ranks) : "";
  if (!cuda) return "cpu (fp32)" + split;
  return fmt::format("cuda:{} ({}){}", gpu, dtype_name(resolved_dtype(*this, model)), split);
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
  if (device.ranks != 1)
    throw_error("internal: a calibration backend is one rank; {} asked", device.ranks);
  if (!device.cuda) return make_cpu_backend(model, calibration_kv(max_tokens), observer);
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
                       int max_tokens) {
  for (const LayerWeights<WeightRef>& l : model.weights.layers)
    if (l.qkv.quant.quantized() || l.up.quant.quantized())
      throw_error("calibration runs the unquantized model; {} is marked for {}", l.qkv.weight.name,
                  l.qkv.quant.method());
  const int ranks = device.ranks;
  if (ranks < 1) throw_error("calibration over {} tensor-parallel ranks: at least 1", ranks);
  if (ranks > 1 && device.cuda)
    throw_error(
        "calibration on cuda runs on one GPU; it was asked to split the model over {} "
        "ranks (sharded calibration runs on the CPU backend only)",
        ranks);
  // The alpha search's rows are rank 0's (every rank sees the same qkv and up inputs): the other
  // ranks keep none.
  for (int r = 0; r < ranks; ++r)
    collectors_.push_back(
        std::make_unique<StatsCollector>(model.desc.num_layers, r == 0 ? keep_rows : 0));
  if (ranks == 1) {
    backend_ = make_calibration_backend(model, device, *collectors_[0], max_tokens);
    ranks_ = {backend_.get()};
    return;
  }
  rank_desc(model.desc, {0, ranks});  // a degree that does not split the model: its error here
  ranks_.assign(size_t(ranks), nullptr);
  // Each rank fills its own entry while it builds; make_thread_group returns once every rank has.
  backend_ = make_thread_group(ranks, [&, kv = calibration_kv(max_tokens)](Communicator& comm) {
    std::unique_ptr<Backend> b =
        make_cpu_rank_backend(model, kv, comm, collectors_[size_t(comm.rank())].get());
    ranks_[size_t(comm.rank())] = b.get();
    return b;
  });
}

Calibrator::~Calibrator() = default;

void Calibrator::run(const std::vector<std::vector<int32_t>>& samples,
                     const CalibrationProgress& progress) {
  run_calibration(*backend_, samples, progress);
  if (ranks_.size() > 1) joined_ = join_ranks(collectors_);
}

const std::vector<LayerStats>& Calibrator::stats() const {
  return ranks_.size() == 1 ? collectors_[0]->stats() : joined_;
}

SmoothingScorer& Calibrator::scorer() {
  if (sharded_) return *sharded_;
  std::vector<SmoothingScorer*> scorers;
  for (Backend* b : ranks_) {
    SmoothingScorer* s = b->smoothing_scorer();
    if (!s) throw_error("internal: the {} calibration backend has no alpha search", b->name());
    scorers.push_back(s);
  }
  if (scorers.size() == 1) return *scorers[0];
  // The other ranks wait for the leader's next step meanwhile: their scorers run on this thread.
  sharded_ = std::make_unique<ShardedScorer>(std::move(scorers));
  return *sharded_;
}

}  // namespace lmx::smoothquant
