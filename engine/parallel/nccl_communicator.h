// Collectives among the GPUs of one tensor-parallel group, over NCCL: enqueued on a CUDA stream,
// so they run inside the step's stream order and inside captured CUDA graphs. Bootstrapped over
// the host Communicator (threads or MPI processes): rank 0 makes NCCL's unique id and broadcasts
// it. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "engine/parallel/communicator.h"
#include "engine/parallel/device_dtype.h"

namespace lmx {

class PeerAllReduce;

// Which way all-reduces go. `automatic`: small messages (up to kPeerAllReduceMaxBytes) by the
// one-shot kernel over peer memory where the group allows it (engine/parallel/peer_all_reduce.h),
// everything else by NCCL. `nccl`: NCCL for every message.
enum class AllReducePath { automatic, nccl };
inline constexpr size_t kPeerAllReduceMaxBytes = size_t(1) << 20;

// LMX_ALL_REDUCE=auto (the default) or nccl; any other value is an error naming it.
AllReducePath all_reduce_path_from_environment();

class DeviceCommunicator {
 public:
  // A collective over `host`'s ranks: each joins on its current CUDA device. A group of one makes
  // NCCL's communicator of one and its collectives return at once (nothing to exchange).
  static std::unique_ptr<DeviceCommunicator> create(
      Communicator& host, AllReducePath path = all_reduce_path_from_environment());
  ~DeviceCommunicator();
  DeviceCommunicator(const DeviceCommunicator&) = delete;
  DeviceCommunicator& operator=(const DeviceCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether small all-reduces go by the one-shot kernel (AllReducePath::automatic on GPUs that
  // reach each other's memory, ranks in one process).
  bool one_shot_all_reduce() const { return peer_ != nullptr; }

  // data[0, n) = the sum over ranks, in place, device memory, enqueued on `stream`.
  void all_reduce_sum(void* data, size_t n, DeviceDtype dtype, cudaStream_t stream);
  // out[r * n, (r + 1) * n) = rank r's in[0, n); device memory, enqueued on `stream`.
  void all_gather(const void* in, void* out, size_t n, DeviceDtype dtype, cudaStream_t stream);

 private:
  DeviceCommunicator(void* comm, std::unique_ptr<PeerAllReduce> peer, int rank, int size);
  void* comm_;  // ncclComm_t (kept out of this header)
  std::unique_ptr<PeerAllReduce> peer_;  // null: NCCL for every all-reduce
  int rank_, size_;
};

}  // namespace lmx
