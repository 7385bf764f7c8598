// Per-request sampling parameters and what a draw returns. The draw itself is one function of
// (logits, parameters, seed, step) shared by every backend: kernels/sampling.h (repetition
// penalty, then temperature, top-k and top-p in Hugging Face's processor order, then a
// counter-based Gumbel-max draw, or argmax when greedy), so a request draws the same tokens alone
// or inside any batch, and a preempted sequence recomputed later draws them again.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/sampling.h"

namespace lmx {

// Allowed ranges, each end a defined result (docs/serving.md, "Sampling"):
//   temperature: any finite value > 0; below kGreedyTemperature the draw is the argmax, the limit
//     of sampling as the temperature goes to 0 (dividing logits by a smaller one overflows fp32;
//     vLLM draws the same line);
//   repetition_penalty: [kMinRepetitionPenalty, kMaxRepetitionPenalty]: the penalized logits of
//     any finite fp32 logit within 1e34 stay finite, and beyond 1e4 either way the effect has
//     long saturated (the history's tokens always or never win);
//   top_k >= 0 (0 or >= vocab: off), top_p in (0, 1], seed any 64-bit value.
inline constexpr float kGreedyTemperature = 1e-5f;
inline constexpr float kMinRepetitionPenalty = 1e-4f, kMaxRepetitionPenalty = 1e4f;

struct SamplingParams {
  bool greedy = true;
  float temperature = 1.0f;         // > 0; < kGreedyTemperature draws the argmax
  int top_k = 0;                    // 0 = off
  float top_p = 1.0f;               // (0, 1]
  float repetition_penalty = 1.0f;  // [1e-4, 1e4]; 1 = off
  std::optional<uint64_t> seed = std::nullopt;  // unset: the scheduler picks one per request

  void validate() const;  // throws lmx::RequestError naming the parameter and the allowed range

  // The kernel's row for draw number `step` (tokens generated so far) with the resolved seed.
  kernels::SamplingRow row(uint64_t resolved_seed, uint64_t step) const;
};

struct SampledToken {
  int32_t id;
  float logprob;  // log-softmax of the model's raw logits at `id`
};

}  // namespace lmx
