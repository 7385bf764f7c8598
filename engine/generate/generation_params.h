// What a caller asks of one generation (token level; text-level stop sequences are the engine's).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/generate/sampling.h"

namespace lmx {

struct GenerationParams {
  int max_new_tokens = 30;
  SamplingParams sampling;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;  // stop after emitting any of these (besides eos)
  bool return_prompt_logits = false;    // logits at the last prompt position
};

}  // namespace lmx
