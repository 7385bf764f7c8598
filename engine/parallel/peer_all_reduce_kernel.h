// The one-shot all-reduce kernel over GPU memory that every rank of the group can address
// (peer-to-peer over NVLink / PCIe; engine/parallel/peer_all_reduce.h sets it up).
//
// One call on rank r, with P ranks and a message of `bytes` (a multiple of 16):
//   1. copy data[0, bytes) into staging[r] (half `call & 1` of it),
//   2. tell every rank "rank r's block b has copied call `call`" (a flag in its memory) and wait
//      until every rank has said the same to rank r,
//   3. data[i] = sum over p = 0..P-1, in that order, of staging[p][i]: fp32 sums, one rounding,
//      so every rank computes bitwise the same result.
// Block b of every rank copies and sums the same elements, so block b waits only for the block
// b of its peers. The call count lives in device memory (graph replays advance it); staging
// alternates halves, so a rank's copy for call k + 2 can never overwrite what a slower peer is
// still reading for call k: that rank's call k + 1 waited for every peer to start call k + 1,
// which each did only after finishing call k.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/parallel/device_dtype.h"

namespace lmx::peer {

inline constexpr int kMaxRanks = 8;
inline constexpr int kMaxBlocks = 64;

// In each rank's GPU memory, zeroed at creation.
struct Signals {
  uint32_t flag[kMaxBlocks][kMaxRanks];  // [b][p]: the last call whose copy rank p's block b finished
  uint32_t calls[kMaxBlocks];            // this rank's count of calls made (every slot advances)
};

// Every rank's buffers, as this rank's GPU addresses them.
struct PeerBuffers {
  char* staging[kMaxRanks];     // 2 x half_bytes each
  Signals* signals[kMaxRanks];
  size_t half_bytes = 0;
};

// data[0, bytes) (device, 16-byte aligned; bytes a multiple of 16 and <= half_bytes) = the sum
// over the group's ranks, in place, enqueued on `stream`. Every rank must make the same calls in
// the same order with the same sizes. Returns the launch's status.
cudaError_t one_shot_sum(const PeerBuffers& buffers, int rank, int ranks, void* data, size_t bytes,
                         DeviceDtype dtype, cudaStream_t stream);

}  // namespace lmx::peer
