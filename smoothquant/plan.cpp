#include "smoothquant/plan.h"

#include <limits>

#include "engine/core/error.h"
#include "engine/model/weight_map.h"
#include "smoothquant/smoothing.h"

namespace lmx::smoothquant {
namespace {

// The projections reading one smoothed input and their fp32 weights [out, in].
struct Group {
  const InputStats* stats = nullptr;
  std::vector<std::vector<float>> weights;
  std::vector<Matrix> matrices;
  std::vector<float> weight_max;

  Group(const InputStats& s, const std::vector<const LinearRef*>& linears) : stats(&s) {
    for (const LinearRef* l : linears) weights.push_back(materialize_f32(l->weight));
    for (size_t i = 0; i < linears.size(); ++i)
      matrices.push_back({weights[i].data(), linears[i]->out, linears[i]->in});
    weight_max = weight_column_max(matrices);
    if (s.abs_max.size() != weight_max.size())
      throw_error("calibration saw {} input channels for {}, which has {}", s.abs_max.size(),
                  linears[0]->weight.name, weight_max.size());
  }
  std::vector<float> factors(double alpha) const {
    return smoothing_factors(stats->abs_max, weight_max, alpha);
  }
  double error(const std::vector<float>& s) const {
    return w8a8_relative_error(stats->rows.data(), stats->kept(), matrices, s);
  }
};

}  // namespace

bool folds_into_norm(const DecoderDesc& desc) {
  return desc.norm_placement == NormPlacement::Pre && !desc.residual_from_norm;
}

Plan make_plan(const LoadedModel& model, const std::vector<LayerStats>& stats,
               std::optional<double> alpha) {
  const DecoderDesc& d = model.desc;
  if (stats.size() != size_t(d.num_layers))
    throw_error("calibration statistics of {} layers for a model of {}", stats.size(), d.num_layers);
  Plan plan;
  plan.searched = !alpha;
  plan.in_norm = folds_into_norm(d);
  const std::vector<double> grid = alpha ? std::vector<double>{*alpha} : alpha_grid();
  for (int l = 0; l < d.num_layers; ++l) {
    const LayerWeights<WeightRef>& w = model.weights.layers[size_t(l)];
    const LayerStats& st = stats[size_t(l)];
    std::vector<Group> groups;
    if (d.shared_block_norm) {
      groups.emplace_back(st[size_t(LinearSlot::Qkv)], std::vector<const LinearRef*>{&w.qkv, &w.up});
    } else {
      groups.emplace_back(st[size_t(LinearSlot::Qkv)], std::vector<const LinearRef*>{&w.qkv});
      groups.emplace_back(st[size_t(LinearSlot::Up)], std::vector<const LinearRef*>{&w.up});
    }
    LayerPlan best;
    best.error = std::numeric_limits<double>::infinity();
    for (const double a : grid) {
      std::vector<std::vector<float>> s;
      double err = 0.0;
      for (const Group& g : groups) {
        s.push_back(g.factors(a));
        if (plan.searched) err += g.error(s.back());
      }
      if (plan.searched && !(err < best.error)) continue;
      best.alpha = a;
      best.error = plan.searched ? err : 0.0;
      best.qkv = std::make_shared<const std::vector<float>>(std::move(s[0]));
      best.up = s.size() > 1 ? std::make_shared<const std::vector<float>>(std::move(s[1])) : best.qkv;
    }
    plan.layers.push_back(std::move(best));
  }
  return plan;
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
