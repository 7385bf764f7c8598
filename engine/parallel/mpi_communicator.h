// Ranks as processes: the host Communicator over MPI (Open MPI from Debian), for tensor-parallel
// groups that span processes or hosts. Launched by mpirun; NCCL is bootstrapped through it.
#pragma once

#include <memory>

#include "engine/parallel/communicator.h"

namespace lmx {

// Whether this process is one of several started by mpirun / mpiexec (read from the launcher's
// environment: Open MPI's OMPI_COMM_WORLD_SIZE or PMI's PMI_SIZE), so it must join their group.
bool launched_by_mpi();

// This process's rank and the number of processes the launcher started together, read from its
// environment before MPI is initialized (OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE, or
// PMI_RANK / PMI_SIZE): rank 0 of 1 when not launched by mpirun as one of several. Throws
// lmx::Error when the launcher's environment names a size but no rank within it.
struct LaunchedRank {
  int rank = 0;
  int size = 1;
};
LaunchedRank launched_rank();

// Called where every process of the group knows that the group is over: the leader stopped it,
// or all of them agreed that it failed. Only then does the process finalize MPI at exit. A process
// that exits without it (it failed alone, or its leader is gone) leaves MPI unfinalized, which
// makes the launcher end the whole group (Open MPI's mpirun terminates the job with an error)
// instead of waiting in MPI_Finalize for processes that never come.
void mpi_group_ended_together();

// This process's rank of MPI's world (initializing MPI once; finalized at exit). Collectives are
// the same as the in-process communicator's, bitwise: all_reduce_sum gathers every rank's data
// and sums it in rank order on each. Throws lmx::Error when this build has no MPI.
std::unique_ptr<Communicator> make_mpi_communicator();

}  // namespace lmx
