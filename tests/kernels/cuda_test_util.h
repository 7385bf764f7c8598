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
#include <utility>
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
  Dev(Dev&& other) noexcept : p(std::exchange(other.p, nullptr)), n(other.n) {}
  ~Dev() { cudaFree(p); }
  void poison() { cudaMemset(p, 0xff, std::max<size_t>(n, 1) * sizeof(T)); }
  template <typename U>
  void upload(const std::vector<U>& v) {
    std::vector<T> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = T(v[i]);
    cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  // The first `count` elements (all by default), as fp32.
  std::vector<float> download_f(size_t count = size_t(-1)) const {
    std::vector<T> h(std::min(count, n));
    cudaMemcpy(h.data(), p, h.size() * sizeof(T), cudaMemcpyDeviceToHost);
    return std::vector<float>(h.begin(), h.end());
  }
  std::vector<T> download() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

// 2^16 quantiles of N(0, 1), at (i + 0.5) / 2^16 (Acklam's rational approximation of the
// inverse normal CDF, relative error < 1.2e-9): the outermost is +-4.33.
inline const std::vector<float>& normal_quantiles() {
  static const std::vector<float> q = [] {
    constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                            1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
    constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                            6.680131188771972e+01, -1.328068155288572e+01};
    constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                            -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
    constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                            3.754408661907416e+00};
    auto tail = [&](double p) {  // p < 0.02425: the lower tail
      const double t = std::sqrt(-2.0 * std::log(p));
      return (((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t + c[5]) /
             ((((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1.0);
    };
    std::vector<float> v(size_t(1) << 16);
    for (size_t i = 0; i < v.size(); ++i) {
      const double p = (double(i) + 0.5) / double(v.size());
      double x;
      if (p < 0.02425) {
        x = tail(p);
      } else if (p > 1.0 - 0.02425) {
        x = -tail(1.0 - p);
      } else {
        const double t = p - 0.5, r = t * t;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * t /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
      }
      v[i] = float(x);
    }
    return v;
  }();
  return q;
}

// 64-bit SplitMix stream seeded from two draws of `rng` (so callers' later draws still differ).
struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  explicit SplitMix64(std::mt19937& rng) : state(uint64_t(rng()) << 32) { state |= rng(); }
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

// n values from a 2^16-entry table of values: four 16-bit indices a 64-bit draw.
inline std::vector<float> draw_from_table(size_t n, std::mt19937& rng,
                                          const std::vector<float>& table) {
  SplitMix64 g(rng);
  std::vector<float> v(n);
  const size_t whole = n / 4;  // draws that fill four values
  for (size_t d = 0; d < whole; ++d) {
    const uint64_t r = g.next();
    for (size_t j = 0; j < 4; ++j) v[4 * d + j] = table[(r >> (16 * j)) & 0xffff];
  }
  uint64_t r = g.next();
  for (size_t i = 4 * whole; i < n; ++i, r >>= 16) v[i] = table[r & 0xffff];
  return v;
}

// Random N(mean, s) values representable in T (so CPU and GPU see the same inputs), as
// float(T(mean + s * z)) with z one of normal_quantiles(), picked uniformly. Cost: ~1-2 ns a
// value (a table of the 2^16 rounded values is built once a call, 2^16 conversions), where
// std::normal_distribution followed by a host conversion to T took 50-90 ns: the kernel tests
// draw ~10^9 values. The tests need inputs spread like N(mean, s), not its exact tails (cut at
// 4.33 s here).
template <typename T>
std::vector<float> randn(size_t n, std::mt19937& rng, float s = 1.0f, float mean = 0.0f) {
  const std::vector<float>& q = normal_quantiles();
  if (n < q.size() / 4) {  // few values: convert each, not the whole table
    SplitMix64 g(rng);
    std::vector<float> v(n);
    uint64_t r = 0;
    for (size_t i = 0; i < n; ++i, r >>= 16) {
      if (i % 4 == 0) r = g.next();
      v[i] = float(T(mean + s * q[r & 0xffff]));
    }
    return v;
  }
  std::vector<float> table(q.size());
  for (size_t i = 0; i < q.size(); ++i) table[i] = float(T(mean + s * q[i]));
  return draw_from_table(n, rng, table);
}

// The first `count` elements of a downloaded output whose buffer was poisoned (NaN) before the
// launch, after checking that the rest is still NaN: a kernel run on the first rows of a larger
// buffer wrote nothing past them.
inline std::vector<float> written_prefix(const std::vector<float>& all, size_t count) {
  const auto stray = std::find_if(all.begin() + long(std::min(count, all.size())), all.end(),
                                  [](float v) { return !std::isnan(v); });
  EXPECT_TRUE(stray == all.end()) << "element " << (stray - all.begin())
                                  << " written, past the first " << count;
  return std::vector<float>(all.begin(), all.begin() + long(std::min(count, all.size())));
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
