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

struct SamplingParams {
  bool greedy = true;
  float temperature = 1.0f;         // > 0
  int top_k = 0;                    // 0 = off
  float top_p = 1.0f;               // (0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1 = off
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
