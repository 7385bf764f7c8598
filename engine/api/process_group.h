// Tensor-parallel ranks as processes (started by mpirun), as a host sees them: which process this
// is, and the whole life of a process other than 0. Process 0 serves (Engine::create); the others
// never serve: each loads its rank and runs the leader's steps until the leader stops the group
// (docs/tensor-parallel.md). The host needs to know which one it is before it binds a port.
#pragma once

namespace lmx {

namespace properties {
struct ServingConfig;
}

struct ProcessGroupPlace {
  int rank = 0;       // 0..processes-1
  int processes = 1;  // 1 when not started by mpirun as one of several
  bool follower() const { return rank != 0; }
};

// From the launcher's environment (engine/parallel/mpi_communicator.h, launched_rank); starts
// nothing. Throws lmx::Error when that environment is inconsistent.
ProcessGroupPlace process_group_place();

// A follower process's part (process_group_place().follower()): loads the model as the leader's
// Engine::create does (the same configuration gives the same slices), builds this rank and runs
// the leader's steps until the leader stops the group (its engine shut down), then returns.
// Throws lmx::Error when the configuration cannot be served, the group's processes disagree
// (process count, degree: the same error as on every other process) or a rank fails to build.
// The leader's option.model_loading_timeout bounds the group's load: a leader that gives up exits,
// and the launcher then ends this process.
void run_follower(const properties::ServingConfig& config);

}  // namespace lmx
