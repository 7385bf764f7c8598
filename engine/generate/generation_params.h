// What a caller asks of one generation (token level; text-level stop sequences are the engine's).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/generate/sampling.h"
#include "engine/generate/token_constraint.h"

namespace lmx {

struct GenerationParams {
  int max_new_tokens = 30;
  SamplingParams sampling;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;  // stop after emitting any of these (besides eos)
  bool return_prompt_logits = false;    // logits at the last prompt position
  // Logits of the next N draws after the first: entry i is the distribution that chose generated
  // token i + 1 (decode-step parity with transformers).
  int return_step_logits = 0;
  int top_logprobs = 0;  // each draw also returns its k most likely tokens (0..kMaxTopLogprobs)
  // Constrained decoding: each draw is among the tokens it allows, and the sequence finishes
  // (StopSequence) once it is complete. Per sequence and mutable: never share one between
  // requests.
  std::shared_ptr<TokenConstraint> constraint;
};

}  // namespace lmx
