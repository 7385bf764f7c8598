// Helpers for the CUDA-vs-CPU kernel tests: device buffers converted from fp32 host data, NaN
// poisoning (0xff bytes are NaN in fp32, fp16 and bf16), relative L2 error with a written check.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/require_gpu.h"

namespace lmx::test {

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define LMX_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// Skips without a GPU; fails instead under LMX_REQUIRE_GPU=1 (scripts/gpu_tests.sh sets it).
#define LMX_REQUIRE_GPU()                      \
  LMX_GPU_SKIP_UNLESS(::lmx::test::have_gpu(), \
                      "no CUDA GPU on this machine: run scripts/gpu_tests.sh on the device")

// Relative L2 tolerance of one rounding to T of an fp32 result (plus fp32 reordering): fp32 1e-5;
// fp16 2e-3 and bf16 1e-2 (half an ulp of 11 / 8 significant bits is 4.9e-4 / 3.9e-3, and a few
// ops round their inputs once more).
template <typename T>
struct Tol;
template <> struct Tol<float> { static constexpr double rel = 1e-5; };
template <> struct Tol<__half> { static constexpr double rel = 2e-3; };
template <> struct Tol<__nv_bfloat16> { static constexpr double rel = 1e-2; };

// Device buffer of n elements of T; freed on scope exit.
template <typename T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    if (cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) p = nullptr;
    poison();
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p); }
  void poison() { cudaMemset(p, 0xff, std::max<size_t>(n, 1) * sizeof(T)); }
  template <typename U>
  void upload(const std::vector<U>& v) {
    std::vector<T> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = T(v[i]);
    cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<float> download_f() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return std::vector<float>(h.begin(), h.end());
  }
  std::vector<T> download() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

// Random N(0, s) values representable in T (so CPU and GPU see the same inputs).
template <typename T>
std::vector<float> randn(size_t n, std::mt19937& rng, float s = 1.0f, float mean = 0.0f) {
  std::normal_distribution<float> d(mean, s);
  std::vector<float> v(n);
  for (float& x : v) x = float(T(d(rng)));
  return v;
}

// Relative L2 error of `got` against `ref`; fails on the first non-finite (unwritten) element.
inline double rel_l2(const std::vector<float>& got, const std::vector<float>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ADD_FAILURE() << "element " << i << " not written (or not finite)";
      return INFINITY;
    }
    num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

}  // namespace lmx::test
