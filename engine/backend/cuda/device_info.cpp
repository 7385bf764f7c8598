#include "engine/backend/cuda/device_info.h"

#include <algorithm>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"

namespace lmx {

std::string cuda_device_name() {
  int device = 0;
  LMX_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp p{};
  LMX_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return p.name;
}

size_t cuda_memory_used_bytes() {
  size_t free_bytes = 0, total = 0;
  LMX_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return total - free_bytes;
}

double measure_copy_bandwidth_gbps(size_t bytes) {
  DeviceBuffer<char> a(bytes), b(bytes);
  LMX_CUDA_CHECK(cudaMemset(a.get(), 1, bytes));
  cudaEvent_t start, stop;
  LMX_CUDA_CHECK(cudaEventCreate(&start));
  LMX_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int i = 0; i < 7; ++i) {
    LMX_CUDA_CHECK(cudaEventRecord(start));
    LMX_CUDA_CHECK(cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
    LMX_CUDA_CHECK(cudaEventRecord(stop));
    LMX_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    LMX_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    if (i > 0) ms.push_back(t);  // first run warms up
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return 2.0 * double(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

}  // namespace lmx
