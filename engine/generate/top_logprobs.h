// The alternatives of one draw (OpenAI's top_logprobs, TGI's top_n_tokens): the k most likely
// tokens of the distribution the model gave, with their log-probabilities.
#pragma once

#include <span>
#include <vector>

#include "engine/generate/sampling.h"

namespace lmx {

inline constexpr int kMaxTopLogprobs = 20;  // OpenAI's bound

// logits [vocab] -> the min(k, vocab) tokens of largest logit, most likely first (ties: the lower
// id first), each with log_softmax(logits)[id], the same quantity as SampledToken::logprob (the
// model's raw distribution, before temperature and filters). Summed in double. k <= 0: none.
std::vector<SampledToken> top_logprobs(std::span<const float> logits, int k);

}  // namespace lmx
