// The draw of a constrained row, on the host: logits the mask disallows become -inf and the CPU
// sampling kernel (kernels/sampling.h) draws with the row's own SamplingRow, so a seeded draw is
// as reproducible as an unconstrained one and a greedy one picks the best allowed token.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/generate/sampling.h"

namespace lmx {

// logits, mask: [vocab]; history: the ids the repetition penalty applies to. The logprob is the
// model's raw log-softmax at the token, as for every draw (not the masked distribution's).
// nullopt when the mask allows no token.
std::optional<SampledToken> constrained_draw(std::span<const float> logits,
                                             std::span<const uint8_t> mask,
                                             const kernels::SamplingRow& params,
                                             std::span<const int32_t> history);

}  // namespace lmx
