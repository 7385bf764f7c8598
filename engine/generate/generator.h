// Synchronous generation for a set of requests (the CLI, tests, benchmarks): the requests go
// through the same continuous-batching Scheduler the serving engine uses, and the call returns
// when all have finished.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/generate/finish_reason.h"
#include "engine/generate/generation_params.h"
#include "engine/scheduler/scheduler.h"

namespace lmx {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  GenerationParams params;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (an eos / stop token that ended it included)
  std::vector<float> logprobs;  // per generated token
  FinishReason finish = FinishReason::Length;
  std::vector<float> prompt_logits;  // [vocab] when requested
  std::vector<std::vector<float>> step_logits;  // [return_step_logits][vocab] when requested
};

class Generator {
 public:
  explicit Generator(Backend& backend, SchedulerLimits limits = {}) : backend_(backend), limits_(limits) {}

  // Throws RequestError for an invalid request (empty prompt, ids out of the vocabulary, too long
  // for the model's positions or the KV cache, bad sampling parameters) before any work starts.
  std::vector<GenerationResult> generate(std::span<const GenerationRequest> requests);

 private:
  Backend& backend_;
  SchedulerLimits limits_;
};

}  // namespace lmx
