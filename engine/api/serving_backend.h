// The model and the backend a serving configuration names, as the engine (engine.cpp) and a
// follower process of an mpirun group (process_group.cpp) build them alike: the same loading,
// quantization and KV plan on every rank, so every rank's slice matches the leader's.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/backend/backend.h"
#include "engine/model/model.h"

namespace lmx {

namespace properties {
struct ServingConfig;
}

// Sequences that run at once: the rolling batch's, or one dynamic batch (rolling_batch=disable).
int64_t concurrent_sequences(const properties::ServingConfig& config);

// The model as the configuration serves it: quantized as asked, and with an fp8 KV cache's
// per-layer scales (the checkpoint's, calibrated, or option.kv_cache_scale's).
LoadedModel load_for_serving(const properties::ServingConfig& config);

// The backend the configuration names, with the KV cache of its memory plan. Replica `replica` of
// option.max_replicas runs on GPUs [replica * degree, (replica + 1) * degree). In a process of an
// mpirun group other than 0 it runs that rank until the leader stops the group and returns null
// (engine/parallel/rank_group.h, launch_ranks).
std::unique_ptr<Backend> make_backend(const properties::ServingConfig& config,
                                      const LoadedModel& model, int replica);

// Settings that ranks as mpirun processes cannot serve (option.max_replicas above 1: every
// replica would need a group of processes of its own): an lmx::Error naming the setting. Nothing
// when this process was not started by mpirun as one of several.
void check_process_group_settings(const properties::ServingConfig& config);

}  // namespace lmx
