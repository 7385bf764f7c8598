// Generation over a backend: a ragged prefill of all prompts in one forward, then batched decode
// steps; sequences leave the batch as they finish. (Continuous batching with admission control
// builds on the same backend API in the scheduler.)
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/generate/sampling.h"

namespace lmx {

struct GenerationParams {
  int max_new_tokens = 30;
  SamplingParams sampling;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;  // stop after emitting any of these (besides eos)
  bool return_prompt_logits = false;    // logits at the last prompt position
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  GenerationParams params;
};

enum class FinishReason { Length, EosToken, StopSequence };
std::string_view finish_reason_name(FinishReason r);  // "length", "eos_token", "stop_sequence"

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (an eos / stop token that ended it included)
  std::vector<float> logprobs;  // per generated token
  FinishReason finish = FinishReason::Length;
  std::vector<float> prompt_logits;  // [vocab] when requested
};

class Generator {
 public:
  explicit Generator(Backend& backend) : backend_(backend) {}

  // Throws lmx::Error for an invalid request (empty prompt, ids out of the vocabulary, too long for
  // the model's positions or the KV cache, bad sampling parameters) before any work starts.
  std::vector<GenerationResult> generate(std::span<const GenerationRequest> requests);

 private:
  Backend& backend_;
};

}  // namespace lmx
