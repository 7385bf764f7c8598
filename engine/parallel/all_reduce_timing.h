// The device all-reduce (NCCL, or the one-shot kernel for small messages) timed on its own, over GPUs 0..degree-1 of this host (one thread a GPU): the
// figure that tensor-parallel decode steps are judged against (`lmx bench
// --tensor-parallel-degree N` reports it beside the steps). CUDA builds only.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "engine/parallel/nccl_communicator.h"

namespace lmx {

struct AllReduceTiming {
  size_t bytes = 0;          // message size of one call
  double us_per_call = 0;    // mean over the timed calls (CUDA events on rank 0's stream)
  double bus_gbps = 0;       // nccl-tests' bus bandwidth: bytes / time * 2 (degree - 1) / degree
};

// In-place sums of `elements[i]` values of `dtype`, `iterations` back-to-back calls each after 5
// warm-up calls, the way `path` sends them. Needs `degree` >= 2 GPUs.
std::vector<AllReduceTiming> time_all_reduce(int degree, std::span<const size_t> elements,
                                             DeviceDtype dtype, int iterations,
                                             AllReducePath path);

}  // namespace lmx
