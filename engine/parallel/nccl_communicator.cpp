#include "engine/parallel/nccl_communicator.h"

#include <nccl.h>

#include "engine/core/error.h"
#include "engine/core/log.h"

namespace lmx {
namespace {

void check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw_error("NCCL {} failed: {}", what, ncclGetErrorString(rc));
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

std::unique_ptr<DeviceCommunicator> DeviceCommunicator::create(Communicator& host) {
  ncclUniqueId id{};
  if (host.rank() == 0) check(ncclGetUniqueId(&id), "unique id");
  host.broadcast_bytes(&id, sizeof id, 0);
  ncclComm_t comm = nullptr;
  check(ncclCommInitRank(&comm, host.size(), id, host.rank()), "communicator init");
  int device = -1;
  cudaGetDevice(&device);
  lmx::logger().info("NCCL {}.{}: rank {} of {} on GPU {}", NCCL_MAJOR, NCCL_MINOR, host.rank(),
                     host.size(), device);
  return std::unique_ptr<DeviceCommunicator>(
      new DeviceCommunicator(comm, host.rank(), host.size()));
}

DeviceCommunicator::~DeviceCommunicator() {
  if (comm_) ncclCommDestroy(nccl(comm_));
}

void DeviceCommunicator::all_reduce_sum(void* data, size_t n, DeviceDtype dtype,
                                        cudaStream_t stream) {
  if (size_ == 1 || n == 0) return;
  check(ncclAllReduce(data, data, n, nccl_type(dtype), ncclSum, nccl(comm_), stream), "all-reduce");
}

void DeviceCommunicator::all_gather(const void* in, void* out, size_t n, DeviceDtype dtype,
                                    cudaStream_t stream) {
  if (n == 0) return;
  if (size_ == 1) {
    if (in != out) {
      const size_t bytes = n * (dtype == DeviceDtype::F32 ? 4 : 2);
      if (cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
        throw_error("all_gather copy of {} bytes failed", bytes);
    }
    return;
  }
  check(ncclAllGather(in, out, n, nccl_type(dtype), nccl(comm_), stream), "all-gather");
}

}  // namespace lmx
