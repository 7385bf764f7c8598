// What the CUDA kernels plan with about the current GPU: its SMs, compute capability and shared
// memory an SM, read from the driver once a device and cached (they do not change while the
// process runs). Every launcher that sizes a grid or picks a kernel by architecture asks here.
#pragma once

namespace lmx::kernels::cuda {

struct GpuProperties {
  int sms = 0;
  int major = 0, minor = 0;  // compute capability
  int smem_per_sm = 0;       // bytes of shared memory an SM
  bool hopper() const { return major == 9; }
};

// The current device's (cudaGetDevice); throws std::runtime_error naming the CUDA error when it
// cannot be read.
const GpuProperties& current_gpu();

}  // namespace lmx::kernels::cuda
