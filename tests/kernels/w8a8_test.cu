// smoothquant's W8A8 linear on the GPU against its CPU reference (quant/w8a8.h), step by step:
//  - (per-token activation quantization, quantize_rows_int8 with an explicit 1/s, gives the
//    reference's bytes and scales: tests/kernels/row_quantizer_test.cu);
//  - the weight quantizer with col_scale = s gives the bytes of the reference's W diag(s)
//    quantized per channel;
//  - Int8Gemm's int32 sums equal the reference's exactly (integer arithmetic), at row counts from
//    one to past a bucket edge, odd N, Llama-2-7B's prefill shapes, after tuning and without;
//  - the epilogue is the reference's two fp32 products, one rounding to T;
//  - the three together equal quant::cpu::w8a8_linear within one rounding to T.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/int8_layout.h"
#include "kernels/quantize.h"
#include "kernels/w8a8.h"
#include "quant/int8.h"
#include "quant/w8a8.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

using test::Dev;
using test::rel_l2;
using test::Tol;
namespace kc = kernels::cuda;

// Smoothing factors of the size SmoothQuant makes (max|X|^a / max|W|^(1-a)): 0.05 .. 20.
std::vector<float> smoothing(int K, std::mt19937& rng) {
  std::uniform_real_distribution<float> e(-3.0f, 3.0f);
  std::vector<float> s(static_cast<size_t>(K));
  for (float& v : s) v = std::exp(e(rng));
  return s;
}

template <typename T>
class W8A8Cuda : public ::testing::Test {};
using AllTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(W8A8Cuda, AllTypes);

TYPED_TEST(W8A8Cuda, SmoothedWeightQuantizationGivesTheReferenceBytes) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(22);
  const int N = 67, K = 4096;
  const auto w = test::randn<T>(size_t(N) * K, rng, 0.05f);
  const auto s = smoothing(K, rng);
  std::vector<float> smoothed(w);  // the CPU backend's W diag(s) (cpu_backend.cpp smooth_weight)
  for (int o = 0; o < N; ++o)
    for (int k = 0; k < K; ++k) smoothed[size_t(o) * K + k] *= s[size_t(k)];
  std::vector<int8_t> q(w.size());
  std::vector<float> ws(static_cast<size_t>(N));
  quant::cpu::quantize_int8("w", smoothed.data(), N, K, K, q.data(), ws.data());
  Dev<T> dw(w.size());
  Dev<float> ds(s.size()), dws(ws.size());
  Dev<int8_t> dq(q.size());
  dw.upload(w);
  ds.upload(s);
  kc::quantize_rows_int8<T>(dw.p, ds.p, dq.p, dws.p, N, K, nullptr);
  LMX_CUDA_OK(cudaDeviceSynchronize());
  std::vector<int8_t> got(q.size());  // stored in kernels/int8_layout.h's order
  kernels::from_int8_layout(dq.download().data(), got.data(), size_t(N), K);
  EXPECT_EQ(got, q);
  EXPECT_EQ(dws.download(), ws);
}

// Random int8 in [-127, 127], as both quantizers produce.
std::vector<int8_t> random_int8(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-127, 127);
  std::vector<int8_t> v(n);
  for (int8_t& x : v) x = int8_t(d(rng));
  return v;
}

// Int8Gemm's sums of a [M, K] · b [N, K]^T equal quant::cpu::int8_gemm's exactly.
void expect_exact_sums(kc::Int8Gemm& gemm, const std::vector<int8_t>& a,
                       const std::vector<int8_t>& b, int M, int N, int K) {
  std::vector<int32_t> ref(size_t(M) * N);
  quant::cpu::int8_gemm(a.data(), b.data(), ref.data(), M, N, K);
  Dev<int8_t> da(a.size()), db(b.size());
  Dev<int32_t> dacc(ref.size());
  da.upload(a);
  db.upload(b);
  gemm.run(da.p, db.p, dacc.p, M, N, K, nullptr);
  LMX_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(dacc.download(), ref) << M << "x" << N << "x" << K;
}

TEST(Int8GemmCuda, SumsEqualTheReferenceExactly) {
  LMX_REQUIRE_GPU();
  std::mt19937 rng(23);
  Dev<char> workspace(32u << 20);
  kc::Int8Gemm gemm(workspace.p, 32u << 20);
  // (N, K): odd N, the smallest K, a K that is no multiple of 8, Llama-2-7B's down projection.
  for (auto [N, K] : {std::pair{7, 4}, {67, 68}, {1000, 512}, {129, 11008}}) {
    for (int M : {1, 5, 16, 17, 33, 300}) {
      expect_exact_sums(gemm, random_int8(size_t(M) * K, rng), random_int8(size_t(N) * K, rng),
                        M, N, K);
    }
  }
  // Saturated operands: every product -127 * 127, sums of -66 million, exact.
  const int M = 3, N = 5, K = 4096;
  expect_exact_sums(gemm, std::vector<int8_t>(size_t(M) * K, 127),
                    std::vector<int8_t>(size_t(N) * K, -127), M, N, K);
}

TEST(Int8GemmCuda, TunedChoiceKeepsTheSums) {
  LMX_REQUIRE_GPU();
  std::mt19937 rng(24);
  Dev<char> workspace(32u << 20);
  kc::Int8Gemm gemm(workspace.p, 32u << 20);
  const int N = 1024, K = 4096;
  const auto b = random_int8(size_t(N) * K, rng);
  Dev<int8_t> db(b.size());
  db.upload(b);
  for (int M : {512, 300, 257}) {  // the 512 bucket: tuned at 512, reused at 300 and 257
    const auto a = random_int8(size_t(M) * K, rng);
    std::vector<int32_t> ref(size_t(M) * N);
    quant::cpu::int8_gemm(a.data(), b.data(), ref.data(), M, N, K);
    Dev<int8_t> da(a.size());
    Dev<int32_t> dacc(ref.size());
    da.upload(a);
    if (M == 512) {
      const auto t = gemm.tune(da.p, db.p, dacc.p, M, N, K, nullptr);
      std::printf("[ int8 gemm] %d x %d x %d: heuristic %.1f us, kept %.1f us (%d tried)\n", M, N,
                  K, t.heuristic_us, t.best_us, t.candidates);
      EXPECT_GE(t.candidates, 1);
      EXPECT_LE(t.best_us, t.heuristic_us);
    }
    gemm.run(da.p, db.p, dacc.p, M, N, K, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(dacc.download(), ref) << M;
  }
}

TEST(Int8GemmCuda, RefusesWhatItCannotRun) {
  LMX_REQUIRE_GPU();
  Dev<char> workspace(1u << 20);
  kc::Int8Gemm gemm(workspace.p, 1u << 20);
  Dev<int8_t> a(64 * 66), b(64 * 66);
  Dev<int32_t> acc(64 * 64);
  EXPECT_THROW(gemm.run(a.p, b.p, acc.p, 64, 64, 66, nullptr), std::invalid_argument);  // K % 4
  EXPECT_THROW(gemm.run(a.p + 4, b.p, acc.p, 4, 64, 64, nullptr), std::invalid_argument);  // aligned
}

TYPED_TEST(W8A8Cuda, LinearMatchesTheReference) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(25);
  Dev<char> workspace(32u << 20);
  kc::Int8Gemm gemm(workspace.p, 32u << 20);
  // K = 86: a rank's slice of stories260k's down projection at degree 2, not a multiple of 4:
  // weights and activations padded with zero codes to w8a8_padded(K), as the backend stores them.
  for (auto [M, N, K] : {std::tuple{1, 7, 64}, {9, 1003, 512}, {130, 256, 4096}, {12, 64, 86}}) {
    const int Kp = kc::w8a8_padded(K);
    const auto w = test::randn<T>(size_t(N) * K, rng, 0.05f);
    auto x = test::randn<T>(size_t(M) * K, rng);
    x[5] = 30.0f;
    std::vector<int8_t> wq(w.size());
    std::vector<float> ws(static_cast<size_t>(N));
    quant::cpu::quantize_int8("w", w.data(), N, K, K, wq.data(), ws.data());
    std::vector<float> ref(size_t(M) * N);
    quant::cpu::w8a8_linear(x.data(), {wq.data(), ws.data(), nullptr, N, K}, ref.data(), M);
    // In the device's order (kernels/int8_layout.h), as quantize_rows_int8 stores x's codes.
    std::vector<int8_t> wq_padded(size_t(N) * Kp, 0), wq_stored(wq_padded.size());
    for (int n = 0; n < N; ++n)
      std::copy_n(wq.begin() + size_t(n) * K, K, wq_padded.begin() + size_t(n) * Kp);
    kernels::to_int8_layout(wq_padded.data(), wq_stored.data(), size_t(N), Kp);
    Dev<T> dx(x.size()), dy(ref.size());
    Dev<int8_t> dwq(wq_stored.size()), dxq(size_t(M) * Kp);
    Dev<float> dws(ws.size()), dxs(static_cast<size_t>(M));
    Dev<int32_t> dacc(ref.size());
    dx.upload(x);
    dwq.upload(wq_stored);
    dws.upload(ws);
    kc::quantize_rows_int8<T>(dx.p, nullptr, dxq.p, dxs.p, M, K, Kp, nullptr);
    gemm.run(dxq.p, dwq.p, dacc.p, M, N, Kp, nullptr);
    kc::w8a8_scale_epilogue<T>(dacc.p, dxs.p, dws.p, dy.p, M, N, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    const auto y = dy.download_f();
    if constexpr (std::is_same_v<T, float>)
      EXPECT_EQ(y, ref) << M << "x" << N << "x" << K;  // the same bytes, sums and products
    else
      EXPECT_LT(rel_l2(y, ref), Tol<T>::rel) << M << "x" << N << "x" << K;
  }
}

// A W8A8 GEMM's operands on the device: int8 codes of x [M, K] and w [N, K] in the quantizers'
// range (a saturated run at the start of each), positive scales, and the two-step path's output
// (Int8Gemm's sums through the scale epilogue) to compare the other forms with.
template <typename T>
struct CodedGemm {
  int M, N, K;
  Dev<int8_t> xq, wq;
  Dev<float> xs, ws;
  Dev<int32_t> acc;
  Dev<T> two_step;

  CodedGemm(int m, int n, int k, std::mt19937& rng, kc::Int8Gemm& int8)
      : M(m), N(n), K(k), xq(size_t(m) * k), wq(size_t(n) * k), xs(size_t(m)), ws(size_t(n)),
        acc(size_t(m) * n), two_step(size_t(m) * n) {
    std::uniform_int_distribution<int> code(-127, 127);
    std::uniform_real_distribution<float> scale(1e-4f, 1e-2f);
    auto codes = [&](size_t count, int8_t saturated) {
      std::vector<int8_t> v(count);
      for (auto& c : v) c = int8_t(code(rng));
      std::fill_n(v.begin(), std::min<size_t>(count, 64), saturated);
      return v;
    };
    auto scales = [&](int count) {
      std::vector<float> v(static_cast<size_t>(count));
      for (auto& s : v) s = scale(rng);
      return v;
    };
    xq.upload(codes(xq.n, 127)), wq.upload(codes(wq.n, -127));
    xs.upload(scales(M)), ws.upload(scales(N));
    int8.run(xq.p, wq.p, acc.p, M, N, K, nullptr);
    kc::w8a8_scale_epilogue<T>(acc.p, xs.p, ws.p, two_step.p, M, N, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  // How many of `y`'s values differ from the two-step path's.
  size_t differing(const Dev<T>& y) const {
    const auto want = two_step.download_f(), got = y.download_f();
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += !(want[i] == got[i]);
    return differ;
  }
};

// The fused Hopper kernel gives the two-step path's bytes (Int8Gemm's exact sums, the same two
// fp32 products and one rounding), with tiles cut short in M, N and K, and Llama-2-7B's qkv.
TYPED_TEST(W8A8Cuda, WgmmaGemmEqualsTheTwoStepPath) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  ASSERT_TRUE(kc::w8a8_wgmma_supported(16)) << "the project's CUDA code is built for Hopper";
  std::mt19937 rng(26);
  Dev<char> workspace(32u << 20);
  kc::Int8Gemm int8(workspace.p, 32u << 20);
  for (auto [M, N, K] : {std::tuple{1, 8, 16}, {37, 300, 144}, {129, 257, 528}, {300, 1001, 1040},
                         {256, 12288, 4096}}) {
    const CodedGemm<T> g(M, N, K, rng, int8);
    Dev<T> fused(size_t(M) * N);
    kc::w8a8_wgmma_gemm<T>(g.xq.p, g.wq.p, g.xs.p, g.ws.p, fused.p, M, N, K, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(g.differing(fused), 0u) << M << "x" << N << "x" << K;
  }
  Dev<int8_t> codes(64 * 88);
  Dev<float> scales(64);
  Dev<T> out(64 * 64);
  EXPECT_THROW(kc::w8a8_wgmma_gemm<T>(codes.p, codes.p, scales.p, scales.p, out.p, 64, 64, 88,
                                      nullptr),
               std::invalid_argument);  // K % 16
}

// W8A8Gemm times the fused kernel against the two steps on a bucket's first call and keeps the
// faster; either way the bytes are the two steps'. K = 88 (not a multiple of 16) and 37 rows
// (below the fused tile) take the two steps untimed.
TYPED_TEST(W8A8Cuda, GemmKeepsTheTwoStepBytesWhicheverFormItTimes) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(27);
  Dev<char> workspace(32u << 20), workspace2(32u << 20);
  kc::Int8Gemm int8(workspace.p, 32u << 20);
  kc::W8A8Gemm<T> gemm(workspace2.p, 32u << 20);
  for (auto [M, N, K] :
       {std::tuple{130, 300, 144}, {512, 4096, 4096}, {37, 300, 144}, {300, 64, 88}}) {
    CodedGemm<T> g(M, N, K, rng, int8);
    Dev<T> chosen(size_t(M) * N);
    EXPECT_FALSE(gemm.fused(M, N, K).has_value());
    for (int call = 0; call < 2; ++call) {  // the timing call, then the chosen form
      chosen.poison();
      gemm.run(g.xq.p, g.wq.p, g.xs.p, g.ws.p, g.acc.p, chosen.p, M, N, K, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_EQ(g.differing(chosen), 0u) << M << "x" << N << "x" << K << ", call " << call;
    }
    EXPECT_EQ(gemm.fused(M, N, K).has_value(), K % 16 == 0 && M >= kc::kW8A8WgmmaMinRows)
        << M << "x" << N << "x" << K;
  }
}

}  // namespace
}  // namespace lmx
