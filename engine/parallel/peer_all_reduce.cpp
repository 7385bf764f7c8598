#include "engine/parallel/peer_all_reduce.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"
#include "engine/core/log.h"

namespace lmx {
namespace {

// What each rank tells the others about itself.
struct RankInfo {
  long pid = 0;
  int device = -1;
  char* receive = nullptr;
  uint32_t* calls = nullptr;
};

// Why this rank cannot reach every other rank's memory ("" when it can), peer access enabled.
std::string reach_peers(const std::vector<RankInfo>& ranks, int rank) {
  const RankInfo& me = ranks[size_t(rank)];
  for (const RankInfo& other : ranks) {
    if (other.pid != me.pid) return "the ranks are processes, not threads of one";
    if (&other == &me || other.device == me.device) continue;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, me.device, other.device) != cudaSuccess || !can)
      return "GPU " + std::to_string(me.device) + " cannot address GPU " +
             std::to_string(other.device) + "'s memory";
    const cudaError_t rc = cudaDeviceEnablePeerAccess(other.device, 0);
    if (rc == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // not an error: clear it
    } else if (rc != cudaSuccess) {
      return "enabling GPU " + std::to_string(me.device) + "'s access to GPU " +
             std::to_string(other.device) + " failed: " + cudaGetErrorString(rc);
    }
  }
  return "";
}

void free_rank_memory(const RankInfo& r) {
  cudaFree(r.receive);
  cudaFree(r.calls);
}

}  // namespace

struct PeerAllReduce::GroupMemory {
  explicit GroupMemory(std::vector<RankInfo> r) : ranks(std::move(r)) {}
  GroupMemory(const GroupMemory&) = delete;
  GroupMemory& operator=(const GroupMemory&) = delete;
  ~GroupMemory() {
    int current = -1;
    cudaGetDevice(&current);
    for (const RankInfo& r : ranks) {
      cudaSetDevice(r.device);
      cudaDeviceSynchronize();  // the rank's last sums (and its reads of its peers) have finished
    }
    for (const RankInfo& r : ranks) {
      cudaSetDevice(r.device);
      free_rank_memory(r);
    }
    cudaSetDevice(current);
  }
  std::vector<RankInfo> ranks;
};

std::unique_ptr<PeerAllReduce> PeerAllReduce::create(Communicator& host, size_t max_bytes) {
  const int rank = host.rank(), ranks = host.size();
  if (ranks < 2) return nullptr;
  if (ranks > peer::kMaxRanks) {
    if (rank == 0)
      logger().info("all-reduce: NCCL for every message ({} ranks; the one-shot kernel takes {})",
                    ranks, peer::kMaxRanks);
    return nullptr;
  }
  max_bytes = (max_bytes + 15) / 16 * 16;
  RankInfo me;
  me.pid = long(getpid());
  std::string no_memory;
  try {
    LMX_CUDA_CHECK(cudaGetDevice(&me.device));
    const size_t receive = peer::receive_bytes(ranks, max_bytes);
    LMX_CUDA_CHECK(cudaMalloc(&me.receive, receive));
    LMX_CUDA_CHECK(cudaMemset(me.receive, 0xff, receive));  // every word empty
    LMX_CUDA_CHECK(cudaMalloc(&me.calls, peer::kMaxBlocks * sizeof(uint32_t)));
    LMX_CUDA_CHECK(cudaMemset(me.calls, 0, peer::kMaxBlocks * sizeof(uint32_t)));
    LMX_CUDA_CHECK(cudaDeviceSynchronize());  // ready before any peer's first call
  } catch (const std::exception& e) {
    no_memory = e.what();
  }
  if (!all_ranks_ok(host, no_memory.empty())) {  // no rank is left waiting in the exchange
    free_rank_memory(me);
    if (!no_memory.empty()) throw_error("one-shot all-reduce buffers: {}", no_memory);
    throw_error("another tensor-parallel rank could not allocate its one-shot all-reduce buffers");
  }

  std::vector<RankInfo> all(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    RankInfo info = r == rank ? me : RankInfo{};
    host.broadcast_bytes(&info, sizeof info, r);
    all[size_t(r)] = info;
  }
  const std::string why_not = reach_peers(all, rank);
  if (!all_ranks_ok(host, why_not.empty())) {
    if (rank == 0)
      logger().info("all-reduce: NCCL for every message (one-shot over peer memory: {})",
                    why_not.empty() ? "another rank cannot reach its peers" : why_not);
    free_rank_memory(me);
    return nullptr;
  }
  // One GroupMemory for the group: rank 0 makes it and hands the others a pointer to its
  // shared_ptr (the ranks are threads of this process), which it keeps until all have copied it.
  std::shared_ptr<GroupMemory> memory;
  auto* handed = rank == 0 ? new std::shared_ptr<GroupMemory>(std::make_shared<GroupMemory>(all))
                           : nullptr;
  host.broadcast_bytes(&handed, sizeof handed, 0);
  memory = *handed;
  all_ranks_ok(host, true);  // every rank holds its copy
  if (rank == 0) delete handed;
  peer::PeerBuffers buffers{};
  for (int r = 0; r < ranks; ++r) {
    buffers.receive[r] = all[size_t(r)].receive;
    buffers.calls[r] = all[size_t(r)].calls;
  }
  buffers.half_bytes = max_bytes;
  if (rank == 0)
    logger().info("all-reduce: one-shot over peer memory up to {} KiB, NCCL above", max_bytes >> 10);
  return std::unique_ptr<PeerAllReduce>(new PeerAllReduce(std::move(memory), buffers, rank, ranks));
}

bool PeerAllReduce::takes(const void* data, size_t bytes) const {
  return bytes % 16 == 0 && bytes <= buffers_.half_bytes &&
         reinterpret_cast<uintptr_t>(data) % 16 == 0;
}

void PeerAllReduce::all_reduce_sum(void* data, size_t n, DeviceDtype dtype, cudaStream_t stream) {
  const size_t bytes = n * device_dtype_bytes(dtype);
  if (!takes(data, bytes))
    throw_error("internal: one-shot all-reduce of {} bytes at {} (16-byte multiples up to {})",
                bytes, data, buffers_.half_bytes);
  LMX_CUDA_CHECK(peer::one_shot_sum(buffers_, rank_, ranks_, data, bytes, dtype, stream));
}

}  // namespace lmx
