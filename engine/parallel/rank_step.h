// What the leader of a tensor-parallel group (rank 0, the rank the engine drives) tells the other
// ranks before each forward: the batch of the step, so every rank runs the same forward with the
// same collectives. Sent over the host Communicator (threads or MPI processes alike).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/parallel/communicator.h"

namespace lmx {

// A received step: owns the token ids and block tables its chunks point into.
struct RankStep {
  std::vector<int32_t> words;  // the encoded message; chunks' spans point into it
  std::vector<BatchChunk> chunks;
  // A step whose logits rows the ranks draw together (Backend::forward_sample_discard): one
  // entry a row. Empty for a plain forward.
  std::vector<kernels::SamplingRow> draws;
};

// Leader (root 0): sends the step's chunks to every rank; with `draws` (one a logits row), a step
// whose rows the ranks draw together.
void send_step(Communicator& comm, std::span<const BatchChunk> chunks,
               std::span<const kernels::SamplingRow> draws = {});
// Leader: tells every rank to stop (the group is shutting down).
void send_stop(Communicator& comm);
// Other ranks: the next step, or nullopt when the leader stopped the group.
std::optional<RankStep> receive_step(Communicator& comm);

}  // namespace lmx
