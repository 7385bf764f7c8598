#include "engine/generate/constrained_draw.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace lmx {

std::optional<SampledToken> constrained_draw(std::span<const float> logits,
                                             std::span<const uint8_t> mask,
                                             const kernels::SamplingRow& params,
                                             std::span<const int32_t> history) {
  const int vocab = int(logits.size());
  std::vector<float> masked(logits.begin(), logits.end());
  bool any = false;
  for (size_t i = 0; i < masked.size(); ++i) {
    if (i < mask.size() && mask[i])
      any = true;
    else
      masked[i] = -std::numeric_limits<float>::infinity();
  }
  if (!any) return std::nullopt;
  const int32_t history_len = int32_t(history.size());
  SampledToken t{0, 0.0f};
  kernels::cpu::sample(masked.data(), 1, vocab, &params, history.data(), history_len, &history_len,
                       &t.id, &t.logprob);
  if (size_t(t.id) >= mask.size() || !mask[size_t(t.id)]) return std::nullopt;  // e.g. all -inf
  const float top = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(double(l - top));
  t.logprob = logits[size_t(t.id)] - (top + float(std::log(sum)));
  return t;
}

}  // namespace lmx
