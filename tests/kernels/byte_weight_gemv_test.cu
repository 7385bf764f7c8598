// The decode GEMV (kernels/gemm.h's skinny launchers) on one-byte weights against the
// weights-only reference (tests/kernels/quantized_weights.h): int8 (dynamic_int8, smoothquant's
// decode rows) and E4M3 (fp8's decode rows), each in fp16 and bf16:
//  - plain and fp32 out, for every row count the GEMV takes, odd N, Llama's o / down shapes:
//    within one rounding to T (fp32 out: 1e-5);
//  - RMS input (the fused norm) and residual add with a bias, within one rounding;
//  - LayerNorm input, centered through the row sums of the bytes as multiplied (row_dots, against
//    the CPU's), within one rounding;
//  - every case on weights with grouped scales too (int8 by 128 and 64, E4M3 by 128), at the
//    shapes whose K holds whole groups;
//  - weights whose K is not a multiple of 16, and groups the GEMV cannot scale, are refused, not
//    misread.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "kernels/row_dots.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/quantized_weights.h"

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

template <typename C>
class ByteWeightGemv : public ::testing::Test {};
TYPED_TEST_SUITE(ByteWeightGemv, test::ByteWeightCases);

TYPED_TEST(ByteWeightGemv, SkinnyLinearMatchesTheWeightsOnlyReference) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  std::mt19937 rng(13);
  for (auto [N, K] : kShapes) {
    if (!Weight::takes(K)) continue;  // grouped scales: the shapes whose K holds whole groups
    const Weight w(test::randn<float>(size_t(N) * K, rng, 0.05f), N, K);
    for (int M = 1; M <= kc::kSkinnyMaxRows; ++M) {
      const auto x = test::randn<T>(size_t(M) * K, rng);
      const auto ref = w.weights_only(x, M);
      Dev<T> dx(x.size()), dy(ref.size());
      Dev<float> dy32(ref.size());
      dx.upload(x);
      kc::skinny_linear<T>(dx.p, w.template view<T>(), dy.p, M, nullptr);
      kc::skinny_linear_f32_out<T>(dx.p, w.template view<T>(), dy32.p, M, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_LT(rel_l2(dy.download_f(), ref), Tol<T>::rel)
          << Weight::kName << " " << M << "x" << N << "x" << K;
      EXPECT_LT(rel_l2(dy32.download_f(), ref), 1e-5)
          << Weight::kName << " fp32 out " << M << "x" << N << "x" << K;
    }
  }
}

TYPED_TEST(ByteWeightGemv, LayerNormInputThroughRowSums) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  std::mt19937 rng(15);
  for (auto [N, K] : kShapes) {
    if (!Weight::takes(K)) continue;  // grouped scales: the shapes whose K holds whole groups
    const Weight w(test::randn<float>(size_t(N) * K, rng, 0.05f), N, K);
    std::vector<float> sums(static_cast<size_t>(N));
    kernels::cpu::row_dots(w.host_view(), nullptr, sums.data());
    Dev<float> dsums(sums.size());
    kc::row_dots<T>(w.template view<T>(), nullptr, dsums.p, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    ASSERT_LT(rel_l2(dsums.download_f(), sums), 1e-5) << Weight::kName << " row sums " << N;
    for (int M : {1, 3, kc::kSkinnyMaxRows}) {
      // x's mean (2) is larger than its spread: uncentered results would be far off.
      const auto x = test::randn<T>(size_t(M) * K, rng, 1.0f, 2.0f);
      std::vector<float> ones(size_t(K), 1.0f), zeros(size_t(K), 0.0f), normed(x.size());
      kernels::cpu::layer_norm(x.data(), ones.data(), zeros.data(), normed.data(), M, K, kEps);
      const auto ref = w.weights_only(normed, M);
      Dev<T> dx(x.size()), dy(ref.size());
      dx.upload(x);
      kc::skinny_linear_norm<T>(dx.p, {kEps, dsums.p}, w.template view<T>(), dy.p, M, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_LT(rel_l2(dy.download_f(), ref), Tol<T>::rel)
          << Weight::kName << " layer norm " << M << "x" << N << "x" << K;
    }
  }
}

TYPED_TEST(ByteWeightGemv, RmsInputAndResidualAdd) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  std::mt19937 rng(14);
  for (auto [N, K] : kShapes) {
    if (!Weight::takes(K)) continue;  // grouped scales: the shapes whose K holds whole groups
    const Weight w(test::randn<float>(size_t(N) * K, rng, 0.05f), N, K);
    for (int M : {1, 3, kc::kSkinnyMaxRows}) {
      // RMS input: a large mean makes an unnormalized result far off.
      const auto x = test::randn<T>(size_t(M) * K, rng, 3.0f, 0.5f);
      std::vector<float> ones(size_t(K), 1.0f), normed(x.size());
      kernels::cpu::rms_norm(x.data(), ones.data(), normed.data(), M, K, kEps);
      const auto ref = w.weights_only(normed, M);
      Dev<T> dx(x.size()), dy(ref.size());
      dx.upload(x);
      kc::skinny_linear_norm<T>(dx.p, {kEps}, w.template view<T>(), dy.p, M, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_LT(rel_l2(dy.download_f(), ref), Tol<T>::rel)
          << Weight::kName << " rms " << M << "x" << N << "x" << K;

      // residual += x W^T + bias.
      const auto bias = test::randn<T>(size_t(N), rng);
      const auto residual = test::randn<T>(size_t(M) * N, rng, 4.0f);
      auto sum = w.weights_only(x, M, bias.data());
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += residual[i];
      Dev<T> db(bias.size()), dr(residual.size());
      db.upload(bias);
      dr.upload(residual);
      kc::skinny_linear_add<T>(dx.p, w.template view<T>(db.p), dr.p, M, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_LT(rel_l2(dr.download_f(), sum), Tol<T>::rel)
          << Weight::kName << " add " << M << "x" << N << "x" << K;
    }
  }
}

TYPED_TEST(ByteWeightGemv, RefusesKNotAMultipleOf16) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  EXPECT_FALSE(kc::skinny_supported(1, 40, true));
  EXPECT_TRUE(kc::skinny_supported(1, 40, false));
  Dev<T> x(40), y(8);
  Dev<int8_t> q(8 * 40);
  Dev<float> s(8);
  const kernels::LinearWeights<T> w{nullptr, nullptr, 8, 40, q.p, s.p, Weight::kE4m3};
  EXPECT_THROW(kc::skinny_linear<T>(x.p, w, y.p, 1, nullptr), std::invalid_argument);
}

TYPED_TEST(ByteWeightGemv, RefusesGroupsItCannotScale) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  EXPECT_TRUE(kernels::scale_groups_supported(64, 256));
  EXPECT_FALSE(kernels::scale_groups_supported(32, 256));   // under a k-step's 64 columns
  EXPECT_FALSE(kernels::scale_groups_supported(128, 320));  // does not divide K
  Dev<T> x(256), y(8);
  Dev<int8_t> q(8 * 256);
  Dev<float> s(8 * 8);
  const kernels::LinearWeights<T> w{nullptr, nullptr, 8, 256, q.p, s.p, Weight::kE4m3, 32};
  EXPECT_THROW(kc::skinny_linear<T>(x.p, w, y.p, 1, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace lmx
