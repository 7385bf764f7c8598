// dynamic_int8 on the GPU against its CPU reference (quant/int8.h):
//  - quantize_rows_int8 gives the reference's int8 bytes and scales exactly (from the same values);
//  - dequantize_rows_int8 gives dequant(W) rounded once to T;
//  - the skinny GEMV on int8 weights (plain, RMS input, residual add) equals the W8A16 reference
//    linear within one rounding to T, for every row count it takes, odd N and both half types;
//  - int8 weights whose K is not a multiple of 16 are refused, not misread.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "kernels/quantize.h"
#include "quant/int8.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

using test::Dev;
using test::rel_l2;
using test::Tol;
namespace kc = kernels::cuda;

constexpr float kEps = 1e-5f;

// (N, K), K % 16 == 0: one partial tile, a partial last k-step, Llama's o / down shapes.
const std::vector<std::pair<int, int>> kShapes = {
    {7, 48}, {33, 4112}, {1000, 512}, {4096, 4096}, {129, 11008}};

// A weight quantized by the CPU reference: int8 values, fp32 scales (one a row), as device buffers.
struct Int8Weight {
  std::vector<int8_t> values;
  std::vector<float> scales;
  Dev<int8_t> dq;
  Dev<float> ds;
  Int8Weight(const std::vector<float>& w, int N, int K)
      : values(size_t(N) * K), scales(size_t(N)), dq(values.size()), ds(scales.size()) {
    quant::cpu::quantize_int8("test weight", w.data(), N, K, K, values.data(), scales.data());
    cudaMemcpy(dq.p, values.data(), values.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(ds.p, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice);
  }
  quant::W8A16Weights ref(int N, int K, const float* bias = nullptr) const {
    return {values.data(), scales.data(), bias, N, K, K};
  }
  template <typename T>
  kernels::LinearWeights<T> view(int N, int K, const T* bias = nullptr) const {
    return {nullptr, bias, N, K, dq.p, ds.p};
  }
};

std::vector<float> reference(const std::vector<float>& x, const Int8Weight& w, int M, int N, int K,
                             const float* bias = nullptr) {
  std::vector<float> y(size_t(M) * N);
  quant::cpu::w8a16_linear(x.data(), w.ref(N, K, bias), y.data(), M);
  return y;
}

template <typename T>
class Int8Cuda : public ::testing::Test {};
using AllTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(Int8Cuda, AllTypes);

TYPED_TEST(Int8Cuda, QuantizeRowsGivesTheReferenceBytes) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(11);
  for (auto [N, K] : kShapes) {
    auto w = test::randn<T>(size_t(N) * K, rng, 0.05f);
    for (int k = 0; k < K; ++k) w[size_t(3 % N) * K + k] = 0.0f;  // an all-zero row: scale 0
    std::vector<int8_t> q(w.size());
    std::vector<float> s(static_cast<size_t>(N));
    quant::cpu::quantize_int8("w", w.data(), N, K, K, q.data(), s.data());
    Dev<T> dw(w.size());
    Dev<int8_t> dq(q.size());
    Dev<float> ds(s.size());
    dw.upload(w);
    kc::quantize_rows_int8<T>(dw.p, nullptr, dq.p, ds.p, N, K, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(dq.download(), q) << N << "x" << K;
    EXPECT_EQ(ds.download(), s) << N << "x" << K;
  }
}

TYPED_TEST(Int8Cuda, DequantizeRowsIsOneRounding) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(12);
  const int N = 129, K = 4112;
  const Int8Weight w(test::randn<float>(size_t(N) * K, rng, 0.05f), N, K);
  std::vector<float> ref(size_t(N) * K);
  quant::cpu::dequantize_int8(w.ref(N, K), ref.data());
  Dev<T> out(ref.size());
  kc::dequantize_rows_int8<T>(w.dq.p, w.ds.p, out.p, N, K, nullptr);
  LMX_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_LT(rel_l2(out.download_f(), ref), Tol<T>::rel);
}

template <typename T>
class Int8GemvCuda : public ::testing::Test {};
using HalfTypes = ::testing::Types<__half, __nv_bfloat16>;
TYPED_TEST_SUITE(Int8GemvCuda, HalfTypes);

TYPED_TEST(Int8GemvCuda, SkinnyLinearMatchesW8A16Reference) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(13);
  for (auto [N, K] : kShapes) {
    const Int8Weight w(test::randn<float>(size_t(N) * K, rng, 0.05f), N, K);
    for (int M = 1; M <= kc::kSkinnyMaxRows; ++M) {
      const auto x = test::randn<T>(size_t(M) * K, rng);
      const auto ref = reference(x, w, M, N, K);
      Dev<T> dx(x.size()), dy(ref.size());
      Dev<float> dy32(ref.size());
      dx.upload(x);
      kc::skinny_linear<T>(dx.p, w.view<T>(N, K), dy.p, M, nullptr);
      kc::skinny_linear_f32_out<T>(dx.p, w.view<T>(N, K), dy32.p, M, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_LT(rel_l2(dy.download_f(), ref), Tol<T>::rel) << M << "x" << N << "x" << K;
      EXPECT_LT(rel_l2(dy32.download_f(), ref), 1e-5) << "fp32 out " << M << "x" << N << "x" << K;
    }
  }
}

TYPED_TEST(Int8GemvCuda, RmsInputAndResidualAddOnInt8Weights) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(14);
  for (auto [N, K] : kShapes) {
    const Int8Weight w(test::randn<float>(size_t(N) * K, rng, 0.05f), N, K);
    for (int M : {1, 3, kc::kSkinnyMaxRows}) {
      // RMS input: a large mean makes an unnormalized result far off.
      const auto x = test::randn<T>(size_t(M) * K, rng, 3.0f, 0.5f);
      std::vector<float> ones(size_t(K), 1.0f), normed(x.size());
      kernels::cpu::rms_norm(x.data(), ones.data(), normed.data(), M, K, kEps);
      const auto ref = reference(normed, w, M, N, K);
      Dev<T> dx(x.size()), dy(ref.size());
      dx.upload(x);
      kc::skinny_linear_rms<T>(dx.p, kEps, w.view<T>(N, K), dy.p, M, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_LT(rel_l2(dy.download_f(), ref), Tol<T>::rel) << "rms " << M << "x" << N << "x" << K;

      // residual += x W^T + bias.
      const auto bias = test::randn<T>(size_t(N), rng);
      const auto residual = test::randn<T>(size_t(M) * N, rng, 4.0f);
      auto sum = reference(x, w, M, N, K, bias.data());
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += residual[i];
      Dev<T> db(bias.size()), dr(residual.size());
      db.upload(bias);
      dr.upload(residual);
      kc::skinny_linear_add<T>(dx.p, w.view<T>(N, K, db.p), dr.p, M, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_LT(rel_l2(dr.download_f(), sum), Tol<T>::rel) << "add " << M << "x" << N << "x" << K;
    }
  }
}

TYPED_TEST(Int8GemvCuda, RefusesInt8WeightsWithKNotAMultipleOf16) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  EXPECT_FALSE(kc::skinny_supported(1, 40, true));
  EXPECT_TRUE(kc::skinny_supported(1, 40, false));
  Dev<T> x(40), y(8);
  Dev<int8_t> q(8 * 40);
  Dev<float> s(8);
  const kernels::LinearWeights<T> w{nullptr, nullptr, 8, 40, q.p, s.p};
  EXPECT_THROW(kc::skinny_linear<T>(x.p, w, y.p, 1, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace lmx
