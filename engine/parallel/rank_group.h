// A tensor-parallel group seen by its caller as one Backend. Rank 0, the leader, runs on the
// caller's thread: before each forward it sends the step (engine/parallel/rank_step.h) to the
// other ranks, which run the same forward, meeting it in the collectives of the model's layers.
// The other ranks are threads of this process (make_thread_group) or other processes launched by
// MPI (lead_group on process 0, follow_leader on the others).
#pragma once

#include <functional>
#include <memory>

#include "engine/backend/backend.h"
#include "engine/parallel/communicator.h"

namespace lmx {

// Builds one rank's backend (its slice of the model) on the calling thread.
using MakeRank = std::function<std::unique_ptr<Backend>(Communicator&)>;

// Degree `degree` as threads over an in-process communicator: ranks 1.. build their backends on
// threads of their own and follow the leader until the returned Backend is destroyed. If any rank
// fails to build, every rank gives up and this throws that rank's error. Degree 1: rank 0 alone,
// over a communicator of one (its collectives return at once).
std::unique_ptr<Backend> make_thread_group(int degree, const MakeRank& make_rank);

// Process 0 of an MPI-launched group: builds rank 0 over `comm` (of size > 1, rank 0) and leads.
// Throws when this or another rank fails to build (all ranks agree first).
std::unique_ptr<Backend> lead_group(std::unique_ptr<Communicator> comm, const MakeRank& make_rank);

// Every other process: builds its rank and runs the leader's steps until the leader stops the
// group. Throws when a rank fails to build.
void follow_leader(Communicator& comm, const MakeRank& make_rank);

// The group of `degree` ranks this process belongs to. Started by mpirun (launched_by_mpi()):
// one rank a process, MPI's world of exactly `degree` processes; process 0 leads and gets the
// Backend, the others follow the leader and get null once it stopped the group (the caller then
// exits). Every process first learns every other's degree: a process count other than the degree,
// or degrees that differ between processes, is the same lmx::Error on every process.
// Otherwise the ranks are threads of this process (make_thread_group).
std::unique_ptr<Backend> launch_ranks(int degree, const MakeRank& make_rank);

}  // namespace lmx
