// The one-shot all-reduce for small messages (engine/parallel/peer_all_reduce_kernel.h): every
// rank writes its data straight into every other rank's GPU memory and sums what arrives, one
// kernel, one trip over the link, no ring. NCCL's all-reduce takes ~9-11 us a call on H200s for the
// 8-16 KiB messages of a batch-1 decode step (bench/RESULTS.md), and a decode step makes two a
// layer, so on a wide group those latencies are a large part of the step. For groups whose ranks
// are threads of one process on GPUs that can address each other's memory (NVLink or PCIe peer
// access). CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "engine/parallel/communicator.h"
#include "engine/parallel/device_dtype.h"
#include "engine/parallel/peer_all_reduce_kernel.h"

namespace lmx {

class PeerAllReduce {
 public:
  // A collective over `host`'s ranks, each on its current CUDA device, for messages up to
  // `max_bytes`. Null on every rank when the group cannot use it (its ranks in several processes,
  // more than 8 ranks, two GPUs without peer access), the reason logged once by rank 0.
  static std::unique_ptr<PeerAllReduce> create(Communicator& host, size_t max_bytes);
  PeerAllReduce(const PeerAllReduce&) = delete;
  PeerAllReduce& operator=(const PeerAllReduce&) = delete;

  // Whether a sum of `bytes` at `data` can go this way: a multiple of 16 bytes up to max_bytes,
  // 16-byte aligned.
  bool takes(const void* data, size_t bytes) const;
  // data[0, n) = the sum over ranks, in place, device memory, enqueued on `stream`; takes() must
  // hold. Every rank makes the same calls in the same order.
  void all_reduce_sum(void* data, size_t n, DeviceDtype dtype, cudaStream_t stream);

 private:
  struct GroupMemory;
  PeerAllReduce(std::shared_ptr<GroupMemory> memory, peer::PeerBuffers buffers, int rank, int ranks)
      : memory_(std::move(memory)), buffers_(buffers), rank_(rank), ranks_(ranks) {}
  // Every rank's buffers, shared by the ranks' objects: the last one destroyed waits for every
  // GPU of the group and frees them, so no rank frees memory a slower peer is still reading.
  std::shared_ptr<GroupMemory> memory_;
  peer::PeerBuffers buffers_;
  int rank_, ranks_;
};

}  // namespace lmx
