// The one-shot all-reduce kernel over GPU memory that every rank of the group can address
// (peer-to-peer over NVLink / PCIe; engine/parallel/peer_all_reduce.h sets it up).
//
// Every rank owns a receive buffer: 2 halves x P slots (one a rank) x half_bytes, every 32-bit
// word of it "empty" (0xFFFFFFFF) between uses. One call on rank r, P ranks, `bytes` (a multiple
// of 16) of data, half h = the call count's parity:
//   1. push data[0, bytes) into slot r of half h of every other rank's buffer (posted stores over
//      the link; a word equal to the empty pattern, a NaN, is sent as the NaN 0x7FFFFFFF);
//   2. data[i] = sum over p = 0..P-1, in that order, of rank p's values: its own data, the
//      others' slots polled until none of the 16 bytes is empty, then emptied again. fp32 sums,
//      one rounding: every rank computes bitwise the same result.
// The data itself says when it has arrived, so there are no flags and no fences: a call costs one
// trip over the link. The call count lives in device memory (graph replays advance it).
// Reuse is safe with two halves: a peer pushes into half h again only in call k + 2, after its call
// k + 1, which needed this rank's call-(k + 1) data, which this rank pushed only once its call k
// (its reads and emptying of half h) had completed.
// The kernel is a programmatic dependent launch (kernels/cuda/pdl.cuh): it reads its call count
// and pushes only after the kernel before it (maybe the previous call) has completed, and then
// lets the next kernel start streaming its weights.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/parallel/device_dtype.h"

namespace lmx::peer {

inline constexpr int kMaxRanks = 8;
inline constexpr int kMaxBlocks = 64;

// Every rank's buffers, as this rank's GPU addresses them.
struct PeerBuffers {
  char* receive[kMaxRanks];    // 2 x ranks x half_bytes each, every byte 0xFF at creation
  uint32_t* calls[kMaxRanks];  // [kMaxBlocks] each, zeroed: the calls the rank has made
  size_t half_bytes = 0;       // one slot
};

// The receive buffer's size for `ranks` ranks and messages up to `max_bytes`.
constexpr size_t receive_bytes(int ranks, size_t max_bytes) { return 2 * size_t(ranks) * max_bytes; }

// data[0, bytes) (device, 16-byte aligned; bytes a multiple of 16 and <= half_bytes) = the sum
// over the group's ranks, in place, enqueued on `stream`. Every rank must make the same calls in
// the same order with the same sizes. Returns the launch's status.
cudaError_t one_shot_sum(const PeerBuffers& buffers, int rank, int ranks, void* data, size_t bytes,
                         DeviceDtype dtype, cudaStream_t stream);

}  // namespace lmx::peer
