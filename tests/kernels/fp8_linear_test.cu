// option.quantize=fp8 on the GPU against its CPU reference (quant/fp8.h), step by step:
//  - quantize_rows_e4m3 pads rows to the GEMM's K with zero codes (its bytes and scales:
//    tests/kernels/row_quantizer_test.cu);
//  - Fp8Gemm (cuBLASLt FP8 with both scales in its epilogue) equals quant::cpu::fp8_linear within
//    the sums' rounding and one rounding to T, at row counts from one to past a bucket edge, odd
//    N, a Llama-2-7B shape, after tuning and without;
//  - a GEMM whose N or K is not a multiple of 16 is refused, not misread.
// (The decode GEMV on E4M3 weights: tests/kernels/byte_weight_gemv_test.cu.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/fp8_linear.h"
#include "kernels/gemm.h"
#include "kernels/quantize.h"
#include "quant/fp8.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/quantized_weights.h"

namespace lmx {
namespace {

using test::Dev;
using test::rel_l2;
using test::Tol;
namespace kc = kernels::cuda;

template <typename T>
class Fp8Cuda : public ::testing::Test {};
using AllTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(Fp8Cuda, AllTypes);

// Rows padded to the GEMM's K (fp8_padded): the same codes, then zeros (a poisoned buffer: every
// padding byte is written).
TYPED_TEST(Fp8Cuda, QuantizeRowsPadsWithZeroCodes) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(35);
  // 172: the general kernel (not a multiple of 8); 200: the register-held one (16-bit T).
  for (const int K : {172, 200}) {
    const int M = 5, Kp = kc::fp8_padded(K);
    ASSERT_EQ(Kp % 16, 0);
    const auto x = test::randn<T>(size_t(M) * K, rng);
    std::vector<uint8_t> q(x.size());
    std::vector<float> s(static_cast<size_t>(M));
    quant::cpu::quantize_rows_e4m3("x", x.data(), M, K, q.data(), s.data());
    std::vector<uint8_t> padded(size_t(M) * Kp, 0);
    for (int m = 0; m < M; ++m)
      std::copy_n(q.begin() + size_t(m) * K, K, padded.begin() + size_t(m) * Kp);
    Dev<T> dx(x.size());
    Dev<uint8_t> dq(padded.size());
    Dev<float> ds(s.size());
    dx.upload(x);
    kc::quantize_rows_e4m3<T>(dx.p, dq.p, ds.p, M, K, Kp, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(dq.download(), padded) << K;
    EXPECT_EQ(ds.download(), s) << K;
    EXPECT_THROW(kc::quantize_rows_e4m3<T>(dx.p, dq.p, ds.p, M, K, K - 1, nullptr),
                 std::invalid_argument);
  }
}

// The two steps of the linear together against quant::cpu::fp8_linear from the same values:
// the activations' bytes are the reference's (above), each product is exact, so y differs only by
// the sums' order and accumulator and the final rounding to T. Hopper's FP8 MMA adds its products
// with fewer significant bits than fp32 (~14, cuBLASLt promoting to fp32 between blocks of k), so
// an fp32 output is off by ~1e-5 relative (3.1e-5 measured at K = 16 on the H100, where the fp32
// order alone gives ~1e-7): bound 1e-3 for fp32 out; fp16 / bf16: one rounding to T on top.
TYPED_TEST(Fp8Cuda, GemmMatchesTheReferenceLinear) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  const double tol = std::is_same_v<T, float> ? 1e-3 : Tol<T>::rel;
  std::mt19937 rng(32);
  kc::GemmContext ctx;
  kc::Fp8Gemm<T> gemm(ctx.workspace(), ctx.workspace_bytes());
  struct Case {
    int M, N, K;
    bool tune;
  };
  for (const Case c : {Case{1, 16, 16, false}, Case{9, 48, 4096, false}, Case{16, 1008, 512, true},
                       Case{17, 1008, 512, false}, Case{300, 96, 64, true},
                       Case{64, 4096, 4096, true}, Case{40, 256, 11008, false}}) {
    const test::Fp8Weight<> w(test::randn<float>(size_t(c.N) * c.K, rng, 0.02f), c.N, c.K);
    const auto x = test::randn<T>(size_t(c.M) * c.K, rng);
    std::vector<float> ref(size_t(c.M) * c.N);
    quant::cpu::fp8_linear(x.data(), w.ref(), ref.data(), c.M);
    Dev<T> dx(x.size()), dy(ref.size());
    Dev<uint8_t> dxq(x.size());
    Dev<float> dxs(size_t(c.M));
    dx.upload(x);
    kc::quantize_rows_e4m3<T>(dx.p, dxq.p, dxs.p, c.M, c.K, c.K, nullptr);
    if (c.tune) {
      const kc::GemmTiming t =
          gemm.tune(dxq.p, dxs.p, w.dq.p, w.ds.p, dy.p, c.M, c.N, c.K, nullptr);
      EXPECT_GE(t.candidates, 1);
      EXPECT_GT(t.best_us, 0.0);
      dy.poison();
    }
    gemm.run(dxq.p, dxs.p, w.dq.p, w.ds.p, dy.p, c.M, c.N, c.K, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    const double e = rel_l2(dy.download_f(), ref);
    EXPECT_LT(e, tol) << c.M << "x" << c.N << "x" << c.K << (c.tune ? " tuned" : "");
    std::printf("[ fp8 gemm ] %d x %d x %d%s: relative L2 vs the reference %.3g\n", c.M, c.N, c.K,
                c.tune ? " (tuned)" : "", e);
  }
}

TYPED_TEST(Fp8Cuda, GemmRefusesNOrKNotAMultipleOf16) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  kc::GemmContext ctx;
  kc::Fp8Gemm<T> gemm(ctx.workspace(), ctx.workspace_bytes());
  EXPECT_FALSE(kc::Fp8Gemm<T>::supported(16, 40));
  EXPECT_FALSE(kc::Fp8Gemm<T>::supported(8, 48));
  EXPECT_TRUE(kc::Fp8Gemm<T>::supported(16, 48));
  Dev<uint8_t> xq(2 * 48), wq(16 * 48);
  Dev<float> xs(2), ws(16);
  Dev<T> y(32);
  EXPECT_THROW(gemm.run(xq.p, xs.p, wq.p, ws.p, y.p, 2, 16, 40, nullptr), std::invalid_argument);
  EXPECT_THROW(gemm.run(xq.p, xs.p, wq.p, ws.p, y.p, 2, 8, 48, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace lmx
