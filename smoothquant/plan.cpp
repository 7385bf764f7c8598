#include "smoothquant/plan.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "smoothquant/smoothing.h"

namespace lmx::smoothquant {
namespace {

// The projections reading one smoothed input: its statistics and the max |w| of each input
// column over all of them.
struct Group {
  const InputStats* stats = nullptr;
  std::vector<LinearSlot> slots;
  std::vector<float> weight_max;

  Group(int layer, const InputStats& s, std::vector<LinearSlot> projections,
        SmoothingScorer& scorer)
      : stats(&s), slots(std::move(projections)) {
    for (const LinearSlot slot : slots) {
      const std::vector<float> m = scorer.weight_column_max(layer, slot);
      if (weight_max.empty()) weight_max.assign(m.size(), 0.0f);
      if (m.size() != weight_max.size() || s.abs_max.size() != m.size())
        throw_error("calibration saw {} input channels for layer {}'s projection {}, which has {}",
                    s.abs_max.size(), layer, int(slot), m.size());
      for (size_t j = 0; j < m.size(); ++j) weight_max[j] = std::max(weight_max[j], m[j]);
    }
  }
  std::vector<float> factors(double alpha) const {
    return smoothing_factors(stats->abs_max, weight_max, alpha);
  }
};

// Each alpha's relative W8A8 error of `g` on its kept rows.
std::vector<double> group_errors(int layer, const Group& g, const std::vector<double>& grid,
                                 SmoothingScorer& scorer) {
  if (g.stats->kept() == 0)
    throw_error("calibration kept no input rows of layer {} to search alpha on", layer);
  scorer.set_rows(g.stats->rows, int(g.stats->kept()), int(g.stats->in));
  std::vector<double> out;
  for (const double a : grid) {
    const std::vector<float> s = g.factors(a);
    ErrorSums sum;
    for (const LinearSlot slot : g.slots) {
      const ErrorSums e = scorer.w8a8_error(layer, slot, s);
      sum.error += e.error;
      sum.reference += e.reference;
    }
    out.push_back(sum.reference > 0.0 ? sum.error / sum.reference : sum.error);
  }
  return out;
}

}  // namespace

bool folds_into_norm(const DecoderDesc& desc) {
  return desc.norm_placement == NormPlacement::Pre && !desc.residual_from_norm;
}

Plan make_plan(const DecoderDesc& d, const std::vector<LayerStats>& stats,
               std::optional<double> alpha, SmoothingScorer& scorer) {
  if (stats.size() != size_t(d.num_layers))
    throw_error("calibration statistics of {} layers for a model of {}", stats.size(), d.num_layers);
  Plan plan;
  plan.searched = !alpha;
  plan.in_norm = folds_into_norm(d);
  const std::vector<double> grid = alpha ? std::vector<double>{*alpha} : alpha_grid();
  for (int l = 0; l < d.num_layers; ++l) {
    const LayerStats& st = stats[size_t(l)];
    const InputStats& qkv_in = st[size_t(LinearSlot::Qkv)];
    std::vector<Group> groups;
    if (d.shared_block_norm) {
      groups.emplace_back(l, qkv_in, std::vector{LinearSlot::Qkv, LinearSlot::Up}, scorer);
    } else {
      groups.emplace_back(l, qkv_in, std::vector{LinearSlot::Qkv}, scorer);
      groups.emplace_back(l, st[size_t(LinearSlot::Up)], std::vector{LinearSlot::Up}, scorer);
    }
    std::vector<double> error(grid.size(), 0.0);
    if (plan.searched)
      for (const Group& g : groups) {
        const std::vector<double> e = group_errors(l, g, grid, scorer);
        for (size_t i = 0; i < grid.size(); ++i) error[i] += e[i];
      }
    size_t best = 0;  // the first least error
    for (size_t i = 1; i < grid.size(); ++i)
      if (error[i] < error[best]) best = i;
    if (!std::isfinite(error[best]))
      throw_error("alpha search: layer {}'s W8A8 error is {} (non-finite calibration rows?)", l,
                  error[best]);
    LayerPlan p;
    p.alpha = grid[best];
    p.error = error[best];
    p.qkv = std::make_shared<const std::vector<float>>(groups[0].factors(p.alpha));
    p.up = groups.size() > 1
               ? std::make_shared<const std::vector<float>>(groups[1].factors(p.alpha))
               : p.qkv;
    plan.layers.push_back(std::move(p));
  }
  return plan;
}

Plan calibrate_and_plan(const LoadedModel& model, const CalibrationDevice& device,
                        const std::vector<std::vector<int32_t>>& samples, int64_t keep_rows,
                        std::optional<double> alpha, const CalibrationProgress& progress) {
  Calibrator calibrator(model, device, keep_rows, longest_sample(samples));
  calibrator.run(samples, progress);
  return make_plan(model.desc, calibrator.stats(), alpha, calibrator.scorer());
}

void mark(LoadedModel& model, const Plan& plan) {
  if (plan.layers.size() != model.weights.layers.size())
    throw_error("a smoothing plan of {} layers for a model of {}", plan.layers.size(),
                model.weights.layers.size());
  const bool in_norm = folds_into_norm(model.desc);
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    LayerWeights<WeightRef>& w = model.weights.layers[l];
    const LayerPlan& p = plan.layers[l];
    const auto set = [&](LinearRef& lin, std::shared_ptr<const std::vector<float>> s) {
      if (s && int64_t(s->size()) != lin.in)
        throw_error("layer {}: {} smoothing factors for {} ({} inputs)", l, s->size(),
                    lin.weight.name, lin.in);
      lin.quant = LinearQuant{QuantKind::W8A8, 0, std::move(s), in_norm};
    };
    set(w.qkv, p.qkv);
    set(w.o, nullptr);
    set(w.up, p.up);
    set(w.down, nullptr);
  }
}

}  // namespace lmx::smoothquant
