#include "engine/api/process_group.h"

#include "engine/api/serving_backend.h"
#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/parallel/mpi_communicator.h"
#include "properties/serving_config.h"

namespace lmx {

ProcessGroupPlace process_group_place() {
  const LaunchedRank launched = launched_rank();
  return {launched.rank, launched.size};
}

void run_follower(const properties::ServingConfig& config) {
  const ProcessGroupPlace place = process_group_place();
  if (!place.follower())
    throw_error("run_follower: this process is rank {} of {}, not a follower; process 0 serves",
                place.rank, place.processes);
  check_process_group_settings(config);
  const LoadedModel model = load_for_serving(config);
  if (make_backend(config, model, 0) != nullptr)
    throw_error("process {} of {} (by the launcher's environment) was made the leader of its MPI "
                "group; the launcher's ranks and MPI's disagree",
                place.rank, place.processes);
  lmx::logger().info("tensor-parallel rank {} of {}: the leader stopped the group", place.rank,
                     place.processes);
}

}  // namespace lmx
