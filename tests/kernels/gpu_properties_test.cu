// current_gpu (kernels/gpu_properties.h), what the launchers plan grids and kernels with: the
// driver's figures for the current device, read once (the same object on every request).
#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include "kernels/gpu_properties.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

TEST(GpuProperties, AreTheDriversFiguresReadOnce) {
  LMX_REQUIRE_GPU();
  int device = 0;
  LMX_CUDA_OK(cudaGetDevice(&device));
  cudaDeviceProp p{};
  LMX_CUDA_OK(cudaGetDeviceProperties(&p, device));
  const kernels::cuda::GpuProperties& gpu = kernels::cuda::current_gpu();
  EXPECT_EQ(gpu.sms, p.multiProcessorCount);
  EXPECT_EQ(gpu.major, p.major);
  EXPECT_EQ(gpu.minor, p.minor);
  EXPECT_EQ(size_t(gpu.smem_per_sm), p.sharedMemPerMultiprocessor);
  EXPECT_EQ(gpu.hopper(), p.major == 9);
  EXPECT_EQ(&kernels::cuda::current_gpu(), &gpu);
}

}  // namespace
}  // namespace lmx
