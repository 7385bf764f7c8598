// CUDA ops vs the CPU reference at odd and large sizes, in every dtype.
// Tolerances (relative L2): fp32 1e-5 (same math, different summation order); fp16 2e-3 and
// bf16 1e-2 (the output is rounded to 11 / 8 significant bits: half an ulp is 4.9e-4 / 3.9e-3).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gemm.h"
#include "kernels/linear.h"
#include "kernels/norm.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

using test::Tol;

template <typename T>
class RmsNormCuda : public ::testing::Test {};
using Types = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(RmsNormCuda, Types);

TYPED_TEST(RmsNormCuda, MatchesCpuReference) {
  LMX_REQUIRE_GPU();
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
    LMX_CUDA_OK(cudaMalloc(&dx, hx.size() * sizeof(T)));
    LMX_CUDA_OK(cudaMalloc(&dw, hw.size() * sizeof(T)));
    LMX_CUDA_OK(cudaMalloc(&dout, hout.size() * sizeof(T)));
    LMX_CUDA_OK(cudaMemcpy(dx, hx.data(), hx.size() * sizeof(T), cudaMemcpyHostToDevice));
    LMX_CUDA_OK(cudaMemcpy(dw, hw.data(), hw.size() * sizeof(T), cudaMemcpyHostToDevice));
    LMX_CUDA_OK(cudaMemset(dout, 0xff, hout.size() * sizeof(T)));  // poison: NaN in every dtype
    kernels::cuda::rms_norm<T>(dx, dw, dout, rows, cols, 1e-6f, nullptr);
    LMX_CUDA_OK(cudaGetLastError());
    LMX_CUDA_OK(cudaMemcpy(hout.data(), dout, hout.size() * sizeof(T), cudaMemcpyDeviceToHost));
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
    EXPECT_LT(std::sqrt(num / den), Tol<T>::rel) << rows << "x" << cols;
  }
}

// Operands of y = x w^T for up to max_m rows, N x K, rounded to T, on the host and the device,
// with the CPU linear of all max_m rows computed once. The rows of a GEMM are independent (row m
// of y reads only row m of x), so the reference of the first M rows is the first M rows of `ref`:
// one set of operands serves every row count M <= max_m (the kernels read the same device x).
template <typename T>
struct LinearOperands {
  int max_m, N, K;
  std::vector<float> x, w, ref;  // [max_m, K], [N, K], [max_m, N]
  test::Dev<T> dx, dw;
  test::Dev<T> dy;
  test::Dev<float> dy32;
  LinearOperands(int max_m_, int N_, int K_)
      : max_m(max_m_),
        N(N_),
        K(K_),
        dx(size_t(max_m_) * K_),
        dw(size_t(N_) * K_),
        dy(size_t(max_m_) * N_),
        dy32(size_t(max_m_) * N_) {
    std::mt19937 rng(max_m * 7 + N * 3 + K);
    x = test::randn<T>(size_t(max_m) * K, rng);
    w = test::randn<T>(size_t(N) * K, rng, 0.05f);
    ref.resize(size_t(max_m) * N);
    kernels::cpu::linear(x.data(), {w.data(), nullptr, N, K}, ref.data(), max_m);
    dx.upload(x);
    dw.upload(w);
  }
};

// Runs launch(dx, dw, dy, dy32) for y = x w^T of the first M rows of `ops` and checks both
// outputs against the CPU linear: the only differences are fp32 summation order (fp32 out: 1e-5)
// and the rounding of the output to T (fp16 2e-3, bf16 1e-2; fp32 1e-5). Outputs are poisoned
// (NaN) first; their first M rows are compared and the rest must stay unwritten.
template <typename T, typename Launch>
void check_linear(LinearOperands<T>& ops, int M, Launch launch) {
  ASSERT_TRUE(ops.dx.p && ops.dw.p && ops.dy.p && ops.dy32.p);
  ASSERT_LE(M, ops.max_m);
  const int N = ops.N, K = ops.K;
  ops.dy.poison();
  ops.dy32.poison();
  launch(ops.dx.p, ops.dw.p, ops.dy.p, ops.dy32.p);
  LMX_CUDA_OK(cudaGetLastError());
  LMX_CUDA_OK(cudaDeviceSynchronize());
  const size_t n = size_t(M) * N;
  const std::vector<float> hy = test::written_prefix(ops.dy.download_f(), n);
  const std::vector<float> hy32 = test::written_prefix(ops.dy32.download_f(), n);
  double num = 0, num32 = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const float r = ops.ref[i];
    ASSERT_TRUE(std::isfinite(hy[i]) && std::isfinite(hy32[i])) << "element " << i;
    num += std::pow(hy[i] - r, 2);
    num32 += std::pow(hy32[i] - r, 2);
    den += double(r) * r;
  }
  EXPECT_LT(std::sqrt(num / den), Tol<T>::rel) << M << "x" << N << "x" << K;
  EXPECT_LT(std::sqrt(num32 / den), 1e-5) << "fp32 output " << M << "x" << N << "x" << K;
}

// cuBLAS linear (T output and fp32 output) vs the CPU.
template <typename T>
class LinearCuda : public ::testing::Test {};
TYPED_TEST_SUITE(LinearCuda, Types);

TYPED_TEST(LinearCuda, MatchesCpuReference) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  kernels::cuda::GemmContext ctx;
  for (auto shape : {std::tuple{1, 67, 64}, {7, 4096, 128}, {83, 129, 4096}, {64, 512, 4096}}) {
    const int M = std::get<0>(shape), N = std::get<1>(shape), K = std::get<2>(shape);
    LinearOperands<T> ops(M, N, K);
    check_linear<T>(ops, M, [&](const T* x, const T* w, T* y, float* y32) {
      const kernels::LinearWeights<T> lw{w, nullptr, N, K};
      kernels::cuda::linear<T>(ctx, x, lw, y, M, nullptr);
      kernels::cuda::linear_f32_out<T>(ctx, x, lw, y32, M, nullptr);
    });
  }
}

// `call` throws std::invalid_argument whose message starts with "<launcher>:".
template <typename Call>
void expect_refused(const std::string& launcher, Call&& call) {
  try {
    call();
    ADD_FAILURE() << launcher << " did not throw std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind(launcher + ":", 0), 0u) << e.what();
  }
}

// cuBLAS adds no bias: a view with one is refused, not silently dropped (M = 0: nothing would run).
TYPED_TEST(LinearCuda, RefusesABias) {
  LMX_REQUIRE_GPU();  // the GemmContext needs a device
  using T = TypeParam;
  kernels::cuda::GemmContext ctx;
  const std::vector<T> host(64);  // never read: the launchers throw before anything runs
  const kernels::LinearWeights<T> lw{host.data(), host.data(), 8, 8};
  T* y = nullptr;
  float* y32 = nullptr;
  expect_refused("linear", [&] { kernels::cuda::linear<T>(ctx, host.data(), lw, y, 0, nullptr); });
  expect_refused("linear_f32_out",
                 [&] { kernels::cuda::linear_f32_out<T>(ctx, host.data(), lw, y32, 0, nullptr); });
  kernels::cuda::linear<T>(ctx, host.data(), lw.without_bias(), y, 0, nullptr);  // M = 0: a no-op
}

// Tuned shapes: whatever tune_linear keeps, and a cuBLASLt plan forced (min_gain < 0), still match
// the CPU. One matrix stands for the layers (count 1).
TYPED_TEST(LinearCuda, TunedShapesMatchCpuReference) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  // One context a min_gain (tunings are kept per context); one set of operands a shape for both.
  const double min_gains[] = {0.01, -1.0};
  kernels::cuda::GemmContext contexts[2];
  for (auto shape : {std::tuple{32, 4096, 4096}, {16, 129, 4104}, {83, 1000, 512}}) {
    const int M = std::get<0>(shape), N = std::get<1>(shape), K = std::get<2>(shape);
    LinearOperands<T> ops(M, N, K);
    for (int g = 0; g < 2; ++g) {
      const double min_gain = min_gains[g];
      kernels::cuda::GemmContext& ctx = contexts[g];
      check_linear<T>(ops, M, [&](const T* x, const T* w, T* y, float* y32) {
        const kernels::cuda::LinearTuning t =
            kernels::cuda::tune_linear<T>(ctx, &w, 1, x, y, M, N, K, nullptr, min_gain);
        const kernels::cuda::LinearTuning t32 =
            kernels::cuda::tune_linear<T>(ctx, &w, 1, x, y32, M, N, K, nullptr, min_gain);
        EXPECT_GT(t.default_us, 0.0);
        EXPECT_GT(t.best_us, 0.0);
        if (min_gain >= 0) {  // kept only when faster
          EXPECT_LE(t.best_us, t.default_us);
          EXPECT_EQ(t.lt, t.best_us < t.default_us);
        } else {  // forced: cuBLASLt proposes algorithms for every one of these shapes
          EXPECT_GT(t.candidates, 0);
          EXPECT_TRUE(t.lt && t32.lt) << M << "x" << N << "x" << K;
        }
        const kernels::LinearWeights<T> lw{w, nullptr, N, K};
        kernels::cuda::linear<T>(ctx, x, lw, y, M, nullptr);
        kernels::cuda::linear_f32_out<T>(ctx, x, lw, y32, M, nullptr);
      });
    }
  }
}

// The skinny (decode) linear for every row count it takes, odd N and K. The kernel works in
// tiles of 16 rows and k-steps of 32 (4 chunks of 8), 8 warps a block splitting the steps, 8
// steps a warp iteration: N = 1, 7 (part of one tile), 33, 67, 129, 1000 (a ragged last tile),
// 4096, 32000 (one and ~8 tiles a block on an H100); K = 8, 40 (fewer steps than warps, a
// partial step), 64, 512 (a partial iteration), 4096 + 8 (a partial last step), 11008 (Llama's
// down_proj: a partial last iteration).
template <typename T>
class SkinnyLinearCuda : public ::testing::Test {};
using HalfTypes = ::testing::Types<__half, __nv_bfloat16>;
TYPED_TEST_SUITE(SkinnyLinearCuda, HalfTypes);

TYPED_TEST(SkinnyLinearCuda, MatchesCpuReference) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  // One set of operands a shape (the reference of kSkinnyMaxRows rows, computed once), every row
  // count M against its first M rows.
  for (auto shape : {std::pair{1, 8},
                     {7, 40},
                     {33, 4104},
                     {67, 64},
                     {1000, 11008},
                     {4096, 4104},
                     {129, 11008},
                     {32000, 512}}) {
    const int N = shape.first, K = shape.second;
    LinearOperands<T> ops(kernels::cuda::kSkinnyMaxRows, N, K);
    for (int M = 1; M <= kernels::cuda::kSkinnyMaxRows; ++M) {
      ASSERT_TRUE(kernels::cuda::skinny_supported(M, K));
      check_linear<T>(ops, M, [&](const T* x, const T* w, T* y, float* y32) {
        const kernels::LinearWeights<T> lw{w, nullptr, N, K};
        kernels::cuda::skinny_linear<T>(x, lw, y, M, nullptr);
        kernels::cuda::skinny_linear_f32_out<T>(x, lw, y32, M, nullptr);
      });
      if (::testing::Test::HasFailure()) return;  // one failing case is enough to read
    }
  }
}

// The skinny launchers whose epilogue adds no bias refuse a view with one, and the gated one a
// w.out that is not 2 x inter, before touching the device: no GPU needed (and M = 0, so nothing
// would run even if one did not throw). Host pointers: never read.
TYPED_TEST(SkinnyLinearCuda, RefusesABiasItDoesNotAdd) {
  using T = TypeParam;
  namespace kc = kernels::cuda;
  std::vector<T> host(64);
  const kernels::LinearWeights<T> lw{host.data(), host.data(), 8, 8};
  T* y = host.data();
  float* y32 = nullptr;
  expect_refused("skinny_linear", [&] { kc::skinny_linear<T>(host.data(), lw, y, 0, nullptr); });
  expect_refused("skinny_linear_f32_out",
                 [&] { kc::skinny_linear_f32_out<T>(host.data(), lw, y32, 0, nullptr); });
  expect_refused("skinny_linear_norm",
                 [&] { kc::skinny_linear_norm<T>(host.data(), {1e-5f}, lw, y, 0, nullptr); });
  expect_refused("skinny_linear_norm_gated", [&] {
    kc::skinny_linear_norm_gated<T>(kernels::ActivationKind::Silu, host.data(), {1e-5f},
                                    {host.data(), host.data(), 7, 8}, y, 0, nullptr);
  });
  // Those that apply the bias take it (M = 0: no-ops).
  kc::skinny_linear_add<T>(host.data(), lw, y, 0, nullptr);
  kc::skinny_linear_norm_gated<T>(kernels::ActivationKind::Silu, host.data(), {1e-5f}, lw, y, 0,
                                  nullptr);
  kc::skinny_linear_norm_act<T>(kernels::ActivationKind::GeluTanh, host.data(), {1e-5f}, lw, y, 0,
                                nullptr);
  kc::skinny_linear<T>(host.data(), lw.without_bias(), y, 0, nullptr);
}

}  // namespace
}  // namespace lmx
