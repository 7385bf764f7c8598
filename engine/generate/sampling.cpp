#include "engine/generate/sampling.h"

#include <cmath>

#include "engine/core/error.h"

namespace lmx {

void SamplingParams::validate() const {
  if (!greedy && !(temperature > 0.0f && std::isfinite(temperature)))
    throw RequestError("parameters.temperature",
                       fmt::format("temperature must be a positive number, got {}", temperature));
  if (top_k < 0)
    throw RequestError("parameters.top_k",
                       fmt::format("top_k must be >= 0 (0 disables it), got {}", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw RequestError("parameters.top_p", fmt::format("top_p must be in (0, 1], got {}", top_p));
  if (!(repetition_penalty >= kMinRepetitionPenalty && repetition_penalty <= kMaxRepetitionPenalty))
    throw RequestError("parameters.repetition_penalty",
                       fmt::format("repetition_penalty must be in [{:g}, {:g}] (1 = off), got {}",
                                   kMinRepetitionPenalty, kMaxRepetitionPenalty,
                                   repetition_penalty));
}

kernels::SamplingRow SamplingParams::row(uint64_t resolved_seed, uint64_t step) const {
  kernels::SamplingRow r;
  r.seed = resolved_seed;
  r.step = step;
  r.temperature = temperature;
  r.top_p = top_p;
  r.repetition_penalty = repetition_penalty;
  r.top_k = top_k;
  r.greedy = greedy || temperature < kGreedyTemperature ? 1 : 0;  // see kGreedyTemperature
  return r;
}

}  // namespace lmx
