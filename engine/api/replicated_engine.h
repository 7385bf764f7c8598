// Whole-model replicas behind one Engine (option.max_replicas): each request goes to the replica
// with the fewest requests in flight; ids, cancellation and updates are the set's own, and
// stats() covers every replica.
#pragma once

#include <memory>
#include <vector>

#include "engine/api/engine.h"

namespace lmx {

// `replicas` must hold at least one engine, all serving the same model and configuration.
std::unique_ptr<Engine> make_replicated_engine(std::vector<std::unique_ptr<Engine>> replicas);

}  // namespace lmx
