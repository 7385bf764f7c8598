// The CPU reference backend: fp32 math (f16/bf16 weights upcast at load), BLAS GEMMs, a paged KV
// cache in host memory. Every other backend is tested against this one.
#pragma once

#include <memory>
#include <span>

#include "engine/backend/activation_observer.h"
#include "engine/backend/backend.h"
#include "engine/model/model.h"

namespace lmx {

std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, const KvCacheShape& kv);

// The same, showing `observer` the input of every decoder projection in each forward
// (smoothquant's calibration); the observer must outlive the backend.
std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, const KvCacheShape& kv,
                                          ActivationObserver& observer);

// One rank of a tensor-parallel group: the rank's slices of the model (engine/model/shard.h),
// meeting the other ranks through `comm` in every forward (all ranks run the same forwards).
// With `observer`, it is shown the inputs of the rank's projections (smoothquant's sharded
// calibration: a row-parallel projection's input is the rank's columns); it must outlive the
// backend.
class Communicator;
std::unique_ptr<Backend> make_cpu_rank_backend(const LoadedModel& model, const KvCacheShape& kv,
                                               Communicator& comm,
                                               ActivationObserver* observer = nullptr);

// The model split over `tensor_parallel_degree` CPU ranks, threads of this process over an
// in-process communicator, or one rank a process when mpirun started this one
// (engine/parallel/rank_group.h, launch_ranks): the reference that tests every family's sharding
// without a GPU. One Backend to its caller: each forward runs on every rank, rank 0's logits are
// returned (every rank's are the same). Under mpirun, processes other than 0 run the leader's
// steps inside this call and get null when it stops the group. Degree 1 without mpirun is
// make_cpu_backend. A degree that does not split the model is an lmx::Error naming the numbers.
std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, const KvCacheShape& kv,
                                          int tensor_parallel_degree);

// Tests: layer `layer`'s K and V cache of a backend made by make_cpu_backend, fp32
// [num_blocks, block_size, kv_heads, head_dim] (with KvCacheShape::dtype fp8_e4m3 every stored
// value is E4M3-representable). Throws lmx::Error for another backend or a bad layer.
struct CpuKvView {
  std::span<const float> k, v;
};
CpuKvView cpu_kv_cache(const Backend& backend, int layer);

}  // namespace lmx
