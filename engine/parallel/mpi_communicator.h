// Ranks as processes: the host Communicator over MPI (Open MPI from Debian), for tensor-parallel
// groups that span processes or hosts. Launched by mpirun; NCCL is bootstrapped through it.
#pragma once

#include <memory>

#include "engine/parallel/communicator.h"

namespace lmx {

// Whether this process is one of several started by mpirun / mpiexec (read from the launcher's
// environment: Open MPI's OMPI_COMM_WORLD_SIZE or PMI's PMI_SIZE), so it must join their group.
bool launched_by_mpi();

// This process's rank of MPI's world (initializing MPI once; finalized at exit). Collectives are
// the same as the in-process communicator's, bitwise: all_reduce_sum gathers every rank's data
// and sums it in rank order on each. Throws lmx::Error when this build has no MPI.
std::unique_ptr<Communicator> make_mpi_communicator();

}  // namespace lmx
