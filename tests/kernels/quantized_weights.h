// Weights quantized by the CPU reference with device copies of their codes and scales, for the
// CUDA tests of one-byte weights: int8 per output channel or grouped (quant/int8.h,
// dynamic_int8) and E4M3 per output channel or grouped (quant/fp8.h; a block-scaled checkpoint's
// scales by row). Each gives the kernels' view of itself and the weights-only
// reference y = x · dequant(W)^T (+ bias): the decode GEMV's arithmetic (activations unquantized),
// and the typed-test cases of the kernels that read them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include "kernels/int8_layout.h"
#include "kernels/kv_dtype.h"
#include "kernels/linear.h"
#include "quant/fp8.h"
#include "quant/int8.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx::test {

// Group = 0: one scale an output row; else one a row per Group input columns (scales [N, K /
// Group]: dynamic_int8 with a group size, a block-scaled fp8 checkpoint's scales by row). takes(K):
// whether the weight can have K columns (grouped: Group divides K).
template <int Group>
struct ScaleGroups {
  static constexpr int kGroup = Group;
  static bool takes(int K) {
    if constexpr (Group == 0)
      return true;
    else
      return K % Group == 0;
  }
  static int group_of(int K) { return Group == 0 ? K : Group; }  // input columns a scale covers
};

template <int Group = 0>
struct Int8Weight : ScaleGroups<Group> {
  static constexpr const char* kName = Group == 0 ? "int8" : "int8 grouped";
  static constexpr bool kE4m3 = false;
  int N, K;
  std::vector<int8_t> values;
  std::vector<float> scales;
  Dev<int8_t> dq;
  Dev<float> ds;
  Int8Weight(const std::vector<float>& w, int N, int K)
      : N(N),
        K(K),
        values(size_t(N) * K),
        scales(size_t(N) * (K / this->group_of(K))),
        dq(values.size()),
        ds(scales.size()) {
    quant::cpu::quantize_int8("test weight", w.data(), N, K, this->group_of(K), values.data(),
                              scales.data());
    // On the device in kernels/int8_layout.h's order, as the backend's quantizer stores them.
    std::vector<int8_t> stored(values.size());
    kernels::to_int8_layout(values.data(), stored.data(), size_t(N), K);
    cudaMemcpy(dq.p, stored.data(), stored.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(ds.p, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice);
  }
  quant::W8A16Weights ref(const float* bias = nullptr) const {
    return {values.data(), scales.data(), bias, N, K, this->group_of(K)};
  }
  kernels::LinearWeights<float> host_view() const {
    return {nullptr, nullptr, N, K, values.data(), scales.data(), false, Group};
  }
  template <typename T>
  kernels::LinearWeights<T> view(const T* bias = nullptr) const {
    return {nullptr, bias, N, K, dq.p, ds.p, false, Group};
  }
  std::vector<float> weights_only(const std::vector<float>& x, int M,
                                  const float* bias = nullptr) const {
    std::vector<float> y(size_t(M) * N);
    quant::cpu::w8a16_linear(x.data(), ref(bias), y.data(), M);
    return y;
  }
};

template <int Group = 0>
struct Fp8Weight : ScaleGroups<Group> {
  static constexpr const char* kName = Group == 0 ? "E4M3" : "E4M3 grouped";
  static constexpr bool kE4m3 = true;
  int N, K;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  Dev<uint8_t> dq;
  Dev<float> ds;
  // Grouped: each group of a row quantized as a row of its own ([N, K] as [N x K / G, G]).
  Fp8Weight(const std::vector<float>& w, int N, int K)
      : N(N),
        K(K),
        codes(size_t(N) * K),
        scales(size_t(N) * (K / this->group_of(K))),
        dq(codes.size()),
        ds(scales.size()) {
    quant::cpu::quantize_rows_e4m3("test weight", w.data(), int64_t(scales.size()),
                                   this->group_of(K), codes.data(), scales.data());
    cudaMemcpy(dq.p, codes.data(), codes.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(ds.p, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice);
  }
  // The W8A8 reference's view (per-row scales only).
  quant::Fp8Weights ref() const {
    static_assert(Group == 0, "the fp8 W8A8 reference takes one scale a row");
    return {codes.data(), scales.data(), nullptr, N, K};
  }
  kernels::LinearWeights<float> host_view() const {
    return {nullptr,       nullptr, N, K, reinterpret_cast<const int8_t*>(codes.data()),
            scales.data(),
            /*e4m3=*/true, Group};
  }
  template <typename T>
  kernels::LinearWeights<T> view(const T* bias = nullptr) const {
    return {nullptr, bias, N, K, reinterpret_cast<const int8_t*>(dq.p), ds.p, /*e4m3=*/true, Group};
  }
  // fp64 sums of x times the exactly decoded codes times their scale (the row's, or the group's).
  // Each output is one sequential sum in k, as before; the codes are decoded through a table made
  // once and the output channels are split over the host's cores (each y element is computed
  // exactly as by one thread, so the values do not depend on the split). Single-threaded with a
  // decode call a product this took ~1e9 products (seconds) a typed test.
  std::vector<float> weights_only(const std::vector<float>& x, int M,
                                  const float* bias = nullptr) const {
    double value[256];
    for (int c = 0; c < 256; ++c) value[c] = kernels::cpu::decode_e4m3(uint8_t(c));
    const int G = this->group_of(K), groups = K / G;
    std::vector<float> y(size_t(M) * N);
    auto channels = [&](int n0, int n1) {
      for (int m = 0; m < M; ++m)
        for (int n = n0; n < n1; ++n) {
          double acc = 0;
          const float* xr = x.data() + size_t(m) * K;
          const uint8_t* cr = codes.data() + size_t(n) * K;
          const float* sr = scales.data() + size_t(n) * groups;
          for (int k = 0; k < K; ++k) acc += double(xr[k]) * value[cr[k]] * sr[k / G];
          y[size_t(m) * N + n] = float(acc + (bias ? bias[n] : 0.0f));
        }
    };
    const int workers = int(std::clamp(std::thread::hardware_concurrency(), 1u, 32u));
    const int per = (N + workers - 1) / workers;
    std::vector<std::thread> pool;
    for (int n0 = 0; n0 < N; n0 += per) pool.emplace_back(channels, n0, std::min(N, n0 + per));
    for (std::thread& t : pool) t.join();
    return y;
  }
};

// The typed cases of the one-byte weight kernels: fp16 and bf16 activations, each on int8 values
// and on E4M3 codes (TypeParam::T, TypeParam::Weight).
template <typename T_, typename Weight_>
struct ByteWeightCase {
  using T = T_;
  using Weight = Weight_;
};
// Grouped scales: int8 by 128 and 64 columns, E4M3 by 128 (a block-scaled fp8 checkpoint's).
using ByteWeightCases = ::testing::Types<
    ByteWeightCase<__half, Int8Weight<>>, ByteWeightCase<__nv_bfloat16, Int8Weight<>>,
    ByteWeightCase<__half, Fp8Weight<>>, ByteWeightCase<__nv_bfloat16, Fp8Weight<>>,
    ByteWeightCase<__half, Int8Weight<128>>, ByteWeightCase<__nv_bfloat16, Int8Weight<64>>,
    ByteWeightCase<__nv_bfloat16, Fp8Weight<128>>>;

}  // namespace lmx::test
