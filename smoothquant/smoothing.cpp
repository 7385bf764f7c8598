#include "smoothquant/smoothing.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace lmx::smoothquant {
namespace {
constexpr float kFloor = 1e-5f;  // keeps channels that never fire (or all-zero columns) finite
}

std::vector<float> smoothing_factors(const std::vector<float>& act_max,
                                     const std::vector<float>& weight_max, double alpha) {
  if (act_max.size() != weight_max.size())
    throw_error("smoothing factors: {} activation maxima for {} weight columns", act_max.size(),
                weight_max.size());
  if (!(alpha >= 0.0 && alpha <= 1.0)) throw_error("smoothing alpha {} is not in [0, 1]", alpha);
  std::vector<float> s(act_max.size());
  for (size_t j = 0; j < s.size(); ++j) {
    const double a = std::max(act_max[j], kFloor), w = std::max(weight_max[j], kFloor);
    s[j] = std::max(float(std::pow(a, alpha) / std::pow(w, 1.0 - alpha)), kFloor);
  }
  return s;
}

std::vector<double> alpha_grid() { return {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}; }

}  // namespace lmx::smoothquant
