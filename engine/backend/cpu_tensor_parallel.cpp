// make_cpu_backend(model, kv, degree): N CPU ranks, as threads over an in-process communicator
// or as the processes mpirun started.
#include "engine/backend/cpu_backend.h"
#include "engine/core/error.h"
#include "engine/parallel/mpi_communicator.h"
#include "engine/parallel/rank_group.h"

namespace lmx {

std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, const KvCacheShape& kv,
                                          int tensor_parallel_degree) {
  if (tensor_parallel_degree < 1)
    throw_error("tensor_parallel_degree must be at least 1, got {}", tensor_parallel_degree);
  if (tensor_parallel_degree == 1 && !launched_by_mpi()) return make_cpu_backend(model, kv);
  return launch_ranks(tensor_parallel_degree, [&](Communicator& comm) {
    return make_cpu_rank_backend(model, kv, comm);
  });
}

}  // namespace lmx
