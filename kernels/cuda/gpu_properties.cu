// current_gpu (kernels/gpu_properties.h): one entry a device, filled on its first request.
#include "kernels/gpu_properties.h"

#include <cuda_runtime.h>

#include <array>
#include <mutex>
#include <stdexcept>
#include <string>

namespace lmx::kernels::cuda {
namespace {

constexpr int kMaxDevices = 64;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("GPU properties: ") + what + ": " +
                             cudaGetErrorString(e));
}

GpuProperties read_device(int device) {
  GpuProperties d;
  check(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  check(cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, device),
        "compute capability");
  check(cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, device),
        "compute capability");
  check(cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                               device),
        "shared memory an SM");
  if (d.sms < 1) throw std::runtime_error("GPU properties: the device reports no SM");
  return d;
}

}  // namespace

const GpuProperties& current_gpu() {
  static std::array<std::once_flag, kMaxDevices> read;
  static std::array<GpuProperties, kMaxDevices> gpus;
  int device = 0;
  check(cudaGetDevice(&device), "current device");
  if (device < 0 || device >= kMaxDevices)
    throw std::runtime_error("GPU properties: device " + std::to_string(device) + " past the " +
                             std::to_string(kMaxDevices) + " this process can track");
  // A throw leaves the flag unset: the next request reads again.
  std::call_once(read[device], [&] { gpus[device] = read_device(device); });
  return gpus[device];
}

}  // namespace lmx::kernels::cuda
