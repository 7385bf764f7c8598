// make_cpu_backend(model, kv, degree): N CPU ranks as threads over an in-process communicator.
#include "engine/backend/cpu_backend.h"
#include "engine/core/error.h"
#include "engine/parallel/rank_group.h"

namespace lmx {

std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, const KvCacheShape& kv,
                                          int tensor_parallel_degree) {
  if (tensor_parallel_degree < 1)
    throw_error("tensor_parallel_degree must be at least 1, got {}", tensor_parallel_degree);
  if (tensor_parallel_degree == 1) return make_cpu_backend(model, kv);
  return make_thread_group(tensor_parallel_degree, [&](Communicator& comm) {
    return make_cpu_rank_backend(model, kv, comm);
  });
}

}  // namespace lmx
