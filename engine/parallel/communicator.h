// Collectives among the ranks of one tensor-parallel group (DESIGN.md, "The model layer"). One
// interface for host memory, two implementations: the in-process one (N ranks as threads of one
// process, so the CPU backend and CI run every family's sharding) and MPI (one rank a process,
// engine/parallel/mpi_communicator.h).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace lmx {

// Collectives among the ranks of one tensor-parallel group. Every rank calls the same collectives
// in the same order with the same sizes. Results are bitwise identical on every rank (the sum is
// taken in rank order 0, 1, ..., N-1 on every rank), so ranks that sample from reduced logits draw
// the same token.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data[0, n) = sum over ranks of each rank's data[0, n), in place; fp32.
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  // out[r * n, (r + 1) * n) = rank r's in[0, n) for every rank r; out holds size() * n floats
  // (in and out must not overlap).
  virtual void all_gather(const float* in, float* out, size_t n) = 0;
  // data[0, n) of rank `root` copied to every rank.
  virtual void broadcast(float* data, size_t n, int root) = 0;
  // The same for raw bytes: data[0, bytes) of rank `root` copied to every rank (the leader's
  // step messages to the other ranks, engine/parallel/rank_step.h).
  virtual void broadcast_bytes(void* data, size_t bytes, int root) = 0;
};

// Whether every rank of the group passed `ok` true (a collective: all ranks call it). Ranks use
// it to agree on a step that may fail on some of them (building their part of the model), so
// none is left waiting for a rank that gave up.
bool all_ranks_ok(Communicator& comm, bool ok);

// `ranks` communicators of one in-process group (ranks >= 1; an error naming the value otherwise),
// element r for the thread that runs rank r. They share state and must outlive every call.
//
// Calls that disagree between ranks (a different collective, n or broadcast root on some rank, or
// a root outside [0, ranks)) throw the same lmx::Error on every rank, and the group stays usable.
// A rank that never makes its call blocks the others (there is no timeout).
std::vector<std::unique_ptr<Communicator>> make_local_communicators(int ranks);

}  // namespace lmx
