// The W8A16 GEMM (kernels/byte_weight_gemm.h) on int8 (dynamic_int8) and E4M3 (fp8) weights,
// fp16 and bf16 activations, against the weights-only reference (tests/kernels/quantized_weights.h):
//  - both kernels: mma.sync at every block shape (x rows <= 8, 16, 32, 64, more) and, on Hopper,
//    wgmma at each of its tiles (64 x 128 and 128 x 128 x rows by weight rows, made to run from
//    one row; unsplit and with K split 2 and 3 ways), at odd M, N and K (boxes of the TMA partly
//    and wholly past the matrix), a K split over several blocks, more than 8 x-row tiles: within
//    one rounding to T (fp32 out: 2e-5);
//  - on Hopper the plan takes wgmma from 24 rows (scales one a row), mma.sync below and for
//    grouped scales; few tiles split K (wgmma: 8 stages a split at least);
//  - a split call gives the same bits every time (its sums are added in split order) and leaves
//    its tile counts at zero for the next call (mma.sync at 32-row tiles, wgmma's 64 and 128-row
//    tiles on Hopper);
//  - every case on weights with grouped scales too (int8 by 128 and 64, E4M3 by 128), at the
//    shapes whose K holds whole groups;
//  - K not a multiple of 16, groups of under 64 columns, weights in T, a bias, a tile that does
//    not exist and a split count past 0-8 are refused, not misread or dropped.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/byte_weight_gemm.h"
#include "kernels/gpu_properties.h"
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

using Options = kc::ByteWeightGemm::Options;

// The kernels and tiles a case runs through: what the plan picks (with and without each block
// starting at its own stage of K), mma.sync alone, and each wgmma tile from one row on (mma.sync
// where the GPU is not a Hopper).
std::vector<std::pair<std::string, Options>> kernel_choices() {
  Options planned, unrotated, mma_only, wg64x128, wg128x128;
  unrotated.rotate_k = false;
  mma_only.wgmma_min_rows = 1 << 30;
  for (auto* o : {&wg64x128, &wg128x128}) o->wgmma_min_rows = 1;
  wg64x128.wgmma_rows_m = 64, wg64x128.wgmma_rows_n = 128;
  wg128x128.wgmma_rows_m = 128, wg128x128.wgmma_rows_n = 128;
  Options wg64x128_split = wg64x128, wg128x128_split = wg128x128;  // K split wherever it has stages
  wg64x128_split.splits = 2, wg128x128_split.splits = 3;
  return {{"planned", planned},
          {"planned, every block from k = 0", unrotated},
          {"mma.sync", mma_only},
          {"wgmma 64x128", wg64x128},
          {"wgmma 128x128", wg128x128},
          {"wgmma 64x128, 2 splits", wg64x128_split},
          {"wgmma 128x128, 3 splits", wg128x128_split}};
}

bool hopper() { return kc::current_gpu().hopper(); }

template <typename C>
class ByteWeightGemm : public ::testing::Test {};
TYPED_TEST_SUITE(ByteWeightGemm, test::ByteWeightCases);

TYPED_TEST(ByteWeightGemm, MatchesTheWeightsOnlyReference) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  std::mt19937 rng(21);
  for (const auto& [kernel, options] : kernel_choices()) {
    kc::ByteWeightGemm gemm(options);
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
        const auto plan = gemm.plan(M, N, K, Weight::kGroup > 0);
        const std::string what =
            kernel + ": " + Weight::kName + " " + std::to_string(M) + "x" + std::to_string(N) +
            "x" + std::to_string(K) + " (" + (plan.wgmma ? "wgmma" : "mma.sync") + ", tile " +
            std::to_string(plan.rows_per_tile) + " x " + std::to_string(plan.weight_rows_per_tile) +
            ", splits " + std::to_string(plan.splits) + ")";
        EXPECT_LT(rel_l2(dy.download_f(), ref), Tol<T>::rel) << what;
        // fp32 out: the wgmma kernel sums all of K in one fp32 chain (1.1-1.2e-5 measured at
        // K = 11008 with fp16 x, H100), mma.sync in several.
        EXPECT_LT(rel_l2(dy32.download_f(), ref), 2e-5) << "fp32 out " << what;
      }
    }
  }
}

TYPED_TEST(ByteWeightGemm, HopperTakesWgmmaFromTwentyFourRowsAndFewTilesSplitK) {
  LMX_REQUIRE_GPU();
  using Weight = typename TypeParam::Weight;
  const kc::ByteWeightGemm gemm;
  const bool grouped = Weight::kGroup > 0;
  EXPECT_FALSE(gemm.plan(23, 12288, 4096, grouped).wgmma);
  for (int M : {24, 64, 128, 256, 512, 4096}) {
    const auto plan = gemm.plan(M, 12288, 4096, grouped);  // Llama-2-7B's qkv: tiles enough
    EXPECT_EQ(plan.wgmma, hopper() && !grouped) << M << " rows";
    if (plan.wgmma) {
      EXPECT_EQ(plan.rows_per_tile, M <= 64 ? 64 : 128) << M << " rows";
      EXPECT_EQ(plan.splits, 1) << M << " rows";
    }
  }
  // Few tiles split K, every kernel and tile (down at 64 and 128 rows: 32 tiles), into no more
  // blocks than the GPU runs at once and (wgmma) no split of under 8 stages of 128 k: the o
  // projection's 32 stages at 128 rows split 4 ways.
  for (int M : {64, 128}) {
    const auto down = gemm.plan(M, 4096, 11008, grouped);
    EXPECT_EQ(down.wgmma, hopper() && !grouped) << M << " rows";
    EXPECT_GT(down.splits, 1) << M << " rows";
  }
  const auto o = gemm.plan(128, 4096, 4096, grouped);
  if (o.wgmma) {
    EXPECT_EQ(o.splits, std::min(4, kc::current_gpu().sms / o.tiles()));
    EXPECT_GE(o.stages_per_split, 8);
  }
}

TYPED_TEST(ByteWeightGemm, SplitCallsGiveTheSameBitsEveryTime) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  std::mt19937 rng(22);
  const int N = 4096, K = 11008;
  const Weight w(test::randn<float>(size_t(N) * K, rng, 0.05f), N, K);
  // mma.sync's 16 and 32-row tiles; on Hopper from 24 rows wgmma's 64 and 128-row ones.
  for (const int M : {16, 24, 64, 128}) {
    kc::ByteWeightGemm gemm;
    const std::string where = std::to_string(M) + " rows";
    ASSERT_GT(gemm.plan(M, N, K, Weight::kGroup > 0).splits, 1)
        << where << ": no longer split K, pick a shape that does";
    const auto x = test::randn<T>(size_t(M) * K, rng);
    Dev<T> dx(x.size());
    dx.upload(x);
    Dev<float> first(size_t(M) * N), again(size_t(M) * N);
    gemm.run<T, float>(dx.p, w.template view<T>(), first.p, M, nullptr);
    for (int i = 0; i < 5; ++i) {
      again.poison();  // a tile whose count was left non-zero would never be stored: NaN stays
      gemm.run<T, float>(dx.p, w.template view<T>(), again.p, M, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      ASSERT_EQ(again.download_f(), first.download_f()) << where << ", call " << i + 2;
    }
    EXPECT_LT(rel_l2(first.download_f(), w.weights_only(x, M)), 1e-5) << where;
  }
}

TYPED_TEST(ByteWeightGemm, RefusesWhatItCannotRead) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::T;
  using Weight = typename TypeParam::Weight;
  kc::ByteWeightGemm gemm;
  Options no_such_tile;
  no_such_tile.wgmma_rows_m = 64, no_such_tile.wgmma_rows_n = 256;
  EXPECT_THROW(kc::ByteWeightGemm{no_such_tile}, std::invalid_argument);
  for (const int splits : {-1, 9}) {
    Options bad_splits;
    bad_splits.splits = splits;
    EXPECT_THROW(kc::ByteWeightGemm{bad_splits}, std::invalid_argument) << splits << " splits";
  }
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
