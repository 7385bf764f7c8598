// CUDA ops vs the CPU reference at odd and large sizes, in every dtype.
// Tolerances (relative L2): fp32 1e-5 (same math, different summation order); fp16 2e-3 and
// bf16 1e-2 (the output is rounded to 11 / 8 significant bits: half an ulp is 4.9e-4 / 3.9e-3).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/norm.h"

namespace lmx {
namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU on this machine: run scripts/gpu_tests.sh on the device"

template <typename T>
struct Dtype;
template <> struct Dtype<float> { static constexpr double tol = 1e-5; };
template <> struct Dtype<__half> { static constexpr double tol = 2e-3; };
template <> struct Dtype<__nv_bfloat16> { static constexpr double tol = 1e-2; };

template <typename T>
class RmsNormCuda : public ::testing::Test {};
using Types = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(RmsNormCuda, Types);

TYPED_TEST(RmsNormCuda, MatchesCpuReference) {
  REQUIRE_GPU();
  using T = TypeParam;
  for (auto [rows, cols] : {std::pair{1, 67}, {7, 4096}, {83, 128}, {3, 5120}}) {
    std::mt19937 rng(rows * 131 + cols);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> x(size_t(rows) * cols), w(cols);
    for (float& v : x) v = float(T(d(rng)));  // inputs representable in T
    for (float& v : w) v = float(T(1.0f + 0.2f * d(rng)));
    std::vector<float> ref(x.size());
    kernels::cpu::rms_norm(x.data(), w.data(), ref.data(), rows, cols, 1e-6f);

    std::vector<T> hx(x.begin(), x.end()), hw(w.begin(), w.end()), hout(x.size());
    T *dx, *dw, *dout;
    CUDA_OK(cudaMalloc(&dx, hx.size() * sizeof(T)));
    CUDA_OK(cudaMalloc(&dw, hw.size() * sizeof(T)));
    CUDA_OK(cudaMalloc(&dout, hout.size() * sizeof(T)));
    CUDA_OK(cudaMemcpy(dx, hx.data(), hx.size() * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dw, hw.data(), hw.size() * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dout, 0xff, hout.size() * sizeof(T)));  // poison: NaN in every dtype
    kernels::cuda::rms_norm<T>(dx, dw, dout, rows, cols, 1e-6f, nullptr);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(hout.data(), dout, hout.size() * sizeof(T), cudaMemcpyDeviceToHost));
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dout);

    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double o = float(hout[i]);
      ASSERT_TRUE(std::isfinite(o)) << "element " << i << " not written";
      num += (o - ref[i]) * (o - ref[i]);
      den += double(ref[i]) * ref[i];
    }
    EXPECT_LT(std::sqrt(num / den), Dtype<T>::tol) << rows << "x" << cols;
  }
}

}  // namespace
}  // namespace lmx
