#include "engine/generate/top_logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lmx {

std::vector<SampledToken> top_logprobs(std::span<const float> logits, int k) {
  const size_t n = std::min(logits.size(), size_t(std::max(k, 0)));
  if (n == 0) return {};
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(double(x) - double(max));
  const double log_sum = std::log(sum) + double(max);
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + long(n), ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  std::vector<SampledToken> top(n);
  for (size_t i = 0; i < n; ++i)
    top[i] = {ids[i], float(double(logits[size_t(ids[i])]) - log_sum)};
  return top;
}

}  // namespace lmx
