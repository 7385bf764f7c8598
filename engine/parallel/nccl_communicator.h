// Collectives among the GPUs of one tensor-parallel group, over NCCL: enqueued on a CUDA stream,
// so they run inside the step's stream order and inside captured CUDA graphs. Bootstrapped over
// the host Communicator (threads or MPI processes): rank 0 makes NCCL's unique id and broadcasts
// it. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "engine/parallel/communicator.h"

namespace lmx {

enum class DeviceDtype { F32, F16, BF16 };

class DeviceCommunicator {
 public:
  // A collective over `host`'s ranks: each joins on its current CUDA device. A group of one makes
  // NCCL's communicator of one and its collectives return at once (nothing to exchange).
  static std::unique_ptr<DeviceCommunicator> create(Communicator& host);
  ~DeviceCommunicator();
  DeviceCommunicator(const DeviceCommunicator&) = delete;
  DeviceCommunicator& operator=(const DeviceCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // data[0, n) = the sum over ranks, in place, device memory, enqueued on `stream`.
  void all_reduce_sum(void* data, size_t n, DeviceDtype dtype, cudaStream_t stream);
  // out[r * n, (r + 1) * n) = rank r's in[0, n); device memory, enqueued on `stream`.
  void all_gather(const void* in, void* out, size_t n, DeviceDtype dtype, cudaStream_t stream);

 private:
  DeviceCommunicator(void* comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  void* comm_;  // ncclComm_t (kept out of this header)
  int rank_, size_;
};

}  // namespace lmx
