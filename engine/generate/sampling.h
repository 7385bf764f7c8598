// Per-request sampling: repetition penalty, then temperature, top-k and top-p (the order of
// Hugging Face's logits processors), then a draw from a seeded generator, or argmax when greedy.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace lmx {

struct SamplingParams {
  bool greedy = true;
  float temperature = 1.0f;         // > 0
  int top_k = 0;                    // 0 = off
  float top_p = 1.0f;               // (0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  uint64_t seed = 0;

  void validate() const;  // throws lmx::Error naming the parameter and the allowed range
};

struct SampledToken {
  int32_t id;
  float logprob;  // log-softmax of the model's raw logits at `id`
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `logits` [vocab] are modified in place. `context` = prompt + generated ids (for the penalty).
  SampledToken sample(std::span<float> logits, std::span<const int32_t> context);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<int32_t> order_;  // scratch
  std::vector<float> probs_;
};

}  // namespace lmx
