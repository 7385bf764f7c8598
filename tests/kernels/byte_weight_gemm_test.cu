// The W8A16 GEMM (kernels/byte_weight_gemm.h) on int8 (dynamic_int8) and E4M3 (fp8) weights,
// fp16 and bf16 activations, against the weights-only reference (tests/kernels/quantized_weights.h):
//  - every block shape (x rows <= 8, 16, 32, 64, more) at odd M, N and K, a K split over several
//    blocks, more than 8 x-row tiles: within one rounding to T (fp32 out: 1e-5);
//  - a split call gives the same bits every time (its sums are added in split order) and leaves
//    its tile counts at zero for the next call;
//  - every case on weights with grouped scales too (int8 by 128 and 64, E4M3 by 128), at the
//    shapes whose K holds whole groups;
//  - K not a multiple of 16, groups of under 64 columns, weights in T and a bias are refused, not
//    misread or dropped.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/byte_weight_gemm.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/quantized_weights.h"

namespace lmx {
namespace {

using test::Dev;
using test::rel_l2;
using test::Tol;
namespace kc = kernels::cuda;

// (N, K) and the M run at it: odd sizes around each block shape's x rows, Llama's o shape split
// over K, a partial last stage (K = 4112), a K smaller than a stage, > 8 x-row tiles (M = 1100).
const std::vector<std::tuple<int, int, std::vector<int>>> kCases = {
    {7, 48, {1, 9, 33, 130}},        {33, 4112, {17, 64, 65}},  {1000, 512, {16, 32, 300}},
    {4096, 4096, {32}},              {129, 11008, {24, 129}},   {200, 256, {1100}}};

template <typename C>
class ByteWeightGemm : public ::testing::Test {};
TYPED_TEST_SUITE(ByteWeightGemm, test::ByteWeightCases);

TYPED_TEST(ByteWeightGemm, MatchesTheWeightsOnlyReference) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  std::mt19937 rng(21);
  kc::ByteWeightGemm gemm;
  for (const auto& [N, K, rows] : kCases) {
    if (!Weight::takes(K)) continue;  // grouped scales: the shapes whose K holds whole groups
    const Weight w(test::randn<float>(size_t(N) * K, rng, 0.05f), N, K);
    for (int M : rows) {
      const auto x = test::randn<T>(size_t(M) * K, rng);
      const auto ref = w.weights_only(x, M);
      Dev<T> dx(x.size()), dy(ref.size());
      Dev<float> dy32(ref.size());
      dx.upload(x);
      gemm.run<T, T>(dx.p, w.template view<T>(), dy.p, M, nullptr);
      gemm.run<T, float>(dx.p, w.template view<T>(), dy32.p, M, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      const auto plan = gemm.plan(M, N, K);
      const std::string what = std::string(Weight::kName) + " " + std::to_string(M) + "x" +
                               std::to_string(N) + "x" + std::to_string(K) + " (x rows a tile " +
                               std::to_string(plan.rows_per_tile) + ", splits " +
                               std::to_string(plan.splits) + ")";
      EXPECT_LT(rel_l2(dy.download_f(), ref), Tol<T>::rel) << what;
      EXPECT_LT(rel_l2(dy32.download_f(), ref), 1e-5) << "fp32 out " << what;
    }
  }
}

TYPED_TEST(ByteWeightGemm, SplitCallsGiveTheSameBitsEveryTime) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  std::mt19937 rng(22);
  kc::ByteWeightGemm gemm;
  const int M = 24, N = 4096, K = 4096;
  ASSERT_GT(gemm.plan(M, N, K).splits, 1) << "the shape no longer splits K: pick one that does";
  const Weight w(test::randn<float>(size_t(N) * K, rng, 0.05f), N, K);
  const auto x = test::randn<T>(size_t(M) * K, rng);
  Dev<T> dx(x.size());
  dx.upload(x);
  Dev<float> first(size_t(M) * N), again(size_t(M) * N);
  gemm.run<T, float>(dx.p, w.template view<T>(), first.p, M, nullptr);
  for (int i = 0; i < 5; ++i) {
    again.poison();  // a tile whose count was left non-zero would never be stored: NaN stays
    gemm.run<T, float>(dx.p, w.template view<T>(), again.p, M, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    ASSERT_EQ(again.download_f(), first.download_f()) << "call " << i + 2;
  }
  EXPECT_LT(rel_l2(first.download_f(), w.weights_only(x, M)), 1e-5);
}

TYPED_TEST(ByteWeightGemm, RefusesWhatItCannotRead) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  kc::ByteWeightGemm gemm;
  EXPECT_FALSE(kc::ByteWeightGemm::supported(40));
  EXPECT_TRUE(kc::ByteWeightGemm::supported(48));
  Dev<T> x(16 * 48), y(16 * 8), bias(8), dense(8 * 48);
  Dev<int8_t> q(8 * 48);
  Dev<float> s(8);
  const kernels::LinearWeights<T> k40{nullptr, nullptr, 8, 40, q.p, s.p, Weight::kE4m3};
  EXPECT_THROW((gemm.run<T, T>(x.p, k40, y.p, 16, nullptr)), std::invalid_argument);
  const kernels::LinearWeights<T> biased{nullptr, bias.p, 8, 48, q.p, s.p, Weight::kE4m3};
  EXPECT_THROW((gemm.run<T, T>(x.p, biased, y.p, 16, nullptr)), std::invalid_argument);
  const kernels::LinearWeights<T> in_t{dense.p, nullptr, 8, 48};
  EXPECT_THROW((gemm.run<T, T>(x.p, in_t, y.p, 16, nullptr)), std::invalid_argument);
  EXPECT_FALSE(kernels::scale_groups_supported(32, 256));
  Dev<T> x256(16 * 256);
  Dev<int8_t> q256(8 * 256);
  Dev<float> s256(8 * 8);
  const kernels::LinearWeights<T> by32{nullptr, nullptr, 8, 256, q256.p, s256.p, Weight::kE4m3, 32};
  EXPECT_THROW((gemm.run<T, T>(x256.p, by32, y.p, 16, nullptr)), std::invalid_argument);
}

}  // namespace
}  // namespace lmx
