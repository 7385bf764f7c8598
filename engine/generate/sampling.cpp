#include "engine/generate/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/core/error.h"

namespace lmx {

void SamplingParams::validate() const {
  if (!greedy && !(temperature > 0.0f && std::isfinite(temperature)))
    throw RequestError("parameters.temperature", fmt::format("temperature must be a positive number, got {}", temperature));
  if (top_k < 0)
    throw RequestError("parameters.top_k", fmt::format("top_k must be >= 0 (0 disables it), got {}", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw RequestError("parameters.top_p", fmt::format("top_p must be in (0, 1], got {}", top_p));
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty)))
    throw RequestError("parameters.repetition_penalty",
                       fmt::format("repetition_penalty must be a positive number, got {}", repetition_penalty));
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  params_.validate();
}

SampledToken Sampler::sample(std::span<float> logits, std::span<const int32_t> context) {
  const int V = int(logits.size());
  // Log-softmax of the raw logits for the reported logprob: one pass for the max, one for the sum
  // (fp32 terms, fp64 accumulation); this runs for every row of every step.
  const auto max_it = std::max_element(logits.begin(), logits.end());
  const float max_raw = *max_it;
  double raw_sum = 0.0;
  for (float l : logits) raw_sum += std::exp(l - max_raw);
  const float log_z = max_raw + float(std::log(raw_sum));
  if (params_.greedy && params_.repetition_penalty == 1.0f)  // the common case: no copy needed
    return {int32_t(max_it - logits.begin()), max_raw - log_z};
  const std::vector<float> raw(logits.begin(), logits.end());

  if (params_.repetition_penalty != 1.0f) {
    std::vector<bool> seen(size_t(V), false);
    for (int32_t id : context)
      if (id >= 0 && id < V && !seen[size_t(id)]) {
        seen[size_t(id)] = true;
        float& l = logits[size_t(id)];
        l = l < 0.0f ? l * params_.repetition_penalty : l / params_.repetition_penalty;
      }
  }

  int32_t chosen;
  if (params_.greedy) {
    chosen = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  } else {
    for (float& l : logits) l /= params_.temperature;
    order_.resize(size_t(V));
    std::iota(order_.begin(), order_.end(), 0);
    const int keep_k = params_.top_k > 0 ? std::min(params_.top_k, V) : V;
    auto by_logit = [&](int32_t a, int32_t b) {
      return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    };
    std::partial_sort(order_.begin(), order_.begin() + keep_k, order_.end(), by_logit);
    order_.resize(size_t(keep_k));
    // Softmax over the kept tokens, highest first; then the smallest prefix reaching top_p.
    const float top = logits[size_t(order_[0])];
    probs_.resize(order_.size());
    double total = 0.0;
    for (size_t i = 0; i < order_.size(); ++i) {
      probs_[i] = std::exp(logits[size_t(order_[i])] - top);
      total += probs_[i];
    }
    size_t keep = order_.size();
    if (params_.top_p < 1.0f) {
      double cumulative = 0.0;
      for (size_t i = 0; i < order_.size(); ++i) {
        cumulative += probs_[i] / total;
        if (cumulative >= params_.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    double kept_total = 0.0;
    for (size_t i = 0; i < keep; ++i) kept_total += probs_[i];
    std::uniform_real_distribution<double> uniform(0.0, kept_total);
    const double r = uniform(rng_);
    double acc = 0.0;
    chosen = order_[keep - 1];
    for (size_t i = 0; i < keep; ++i) {
      acc += probs_[i];
      if (r < acc) {
        chosen = order_[i];
        break;
      }
    }
  }
  return {chosen, raw[size_t(chosen)] - log_z};
}

}  // namespace lmx
