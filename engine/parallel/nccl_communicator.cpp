#include "engine/parallel/nccl_communicator.h"

#include <cstdlib>
#include <string_view>

#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/parallel/nccl_library.h"
#include "engine/parallel/peer_all_reduce.h"

namespace lmx {
namespace {

void check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw_error("NCCL {} failed: {}", what, nccl_library().GetErrorString(rc));
}

ncclDataType_t nccl_type(DeviceDtype d) {
  switch (d) {
    case DeviceDtype::F32:
      return ncclFloat32;
    case DeviceDtype::F16:
      return ncclFloat16;
    case DeviceDtype::BF16:
      return ncclBfloat16;
  }
  throw_error("internal: unknown device dtype");
}

ncclComm_t nccl(void* comm) { return static_cast<ncclComm_t>(comm); }

}  // namespace

AllReducePath all_reduce_path_from_environment() {
  const char* value = std::getenv("LMX_ALL_REDUCE");
  if (!value || std::string_view(value) == "auto") return AllReducePath::automatic;
  if (std::string_view(value) == "nccl") return AllReducePath::nccl;
  throw_error("LMX_ALL_REDUCE='{}' is not one of auto, nccl", value);
}

DeviceCommunicator::DeviceCommunicator(void* comm, std::unique_ptr<PeerAllReduce> peer, int rank,
                                       int size)
    : comm_(comm), peer_(std::move(peer)), rank_(rank), size_(size) {}

std::unique_ptr<DeviceCommunicator> DeviceCommunicator::create(Communicator& host,
                                                               AllReducePath path) {
  // Every rank opens the library before the first collective: where it is missing, all of them
  // fail here alike, none waiting for another.
  const NcclLibrary& nccl_lib = nccl_library();
  ncclUniqueId id{};
  if (host.rank() == 0) check(nccl_lib.GetUniqueId(&id), "unique id");
  host.broadcast_bytes(&id, sizeof id, 0);
  ncclComm_t comm = nullptr;
  check(nccl_lib.CommInitRank(&comm, host.size(), id, host.rank()), "communicator init");
  int device = -1, version = 0;
  cudaGetDevice(&device);
  nccl_lib.GetVersion(&version);  // e.g. 22805 = 2.28.5
  lmx::logger().info("NCCL {}.{}: rank {} of {} on GPU {}", version / 10000, version / 100 % 100,
                     host.rank(), host.size(), device);
  std::unique_ptr<PeerAllReduce> peer;
  if (path == AllReducePath::automatic) peer = PeerAllReduce::create(host, kPeerAllReduceMaxBytes);
  return std::unique_ptr<DeviceCommunicator>(
      new DeviceCommunicator(comm, std::move(peer), host.rank(), host.size()));
}

DeviceCommunicator::~DeviceCommunicator() {
  if (comm_) nccl_library().CommDestroy(nccl(comm_));
}

void DeviceCommunicator::all_reduce_sum(void* data, size_t n, DeviceDtype dtype,
                                        cudaStream_t stream) {
  if (size_ == 1 || n == 0) return;
  if (peer_ && peer_->takes(data, n * device_dtype_bytes(dtype))) {
    peer_->all_reduce_sum(data, n, dtype, stream);
    return;
  }
  check(nccl_library().AllReduce(data, data, n, nccl_type(dtype), ncclSum, nccl(comm_), stream),
        "all-reduce");
}

void DeviceCommunicator::all_gather(const void* in, void* out, size_t n, DeviceDtype dtype,
                                    cudaStream_t stream) {
  if (n == 0) return;
  if (size_ == 1) {
    if (in != out) {
      const size_t bytes = n * device_dtype_bytes(dtype);
      if (cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
        throw_error("all_gather copy of {} bytes failed", bytes);
    }
    return;
  }
  check(nccl_library().AllGather(in, out, n, nccl_type(dtype), nccl(comm_), stream), "all-gather");
}

}  // namespace lmx
