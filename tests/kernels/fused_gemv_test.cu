// The decode GEMV's fused forms (kernels/gemm.h: skinny_linear_norm with RMSNorm and LayerNorm
// input, _norm_act, _norm_gated, skinny_linear_add, _norm_rope_kv) and the weight folds they rely
// on (scale_columns; row_dots for a LayerNorm's bias and row sums), against the CPU reference ops
// they replace, for every row count the kernel takes, odd sizes and both half types.
// Tolerances: Tol<T> (one rounding of an fp32 result to T), except where the test says.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/activation.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "kernels/rope_kv.h"
#include "kernels/row_dots.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

using test::Dev;
using test::rel_l2;
using test::Tol;
namespace kc = kernels::cuda;
namespace kr = kernels::cpu;

constexpr float kEps = 1e-5f;

template <typename T>
class FusedGemvCuda : public ::testing::Test {};
using HalfTypes = ::testing::Types<__half, __nv_bfloat16>;
TYPED_TEST_SUITE(FusedGemvCuda, HalfTypes);

// CPU: y = x w^T (fp32).
std::vector<float> cpu_linear(const std::vector<float>& x, const std::vector<float>& w, int M,
                              int N, int K) {
  std::vector<float> y(size_t(M) * N);
  kr::linear(x.data(), {w.data(), nullptr, N, K}, y.data(), M);
  return y;
}

// CPU: RMSNorm of each row of x with unit weight.
std::vector<float> cpu_rms(const std::vector<float>& x, int M, int K) {
  std::vector<float> ones(size_t(K), 1.0f), out(x.size());
  kr::rms_norm(x.data(), ones.data(), out.data(), M, K, kEps);
  return out;
}

// CPU: LayerNorm of each row of x with unit weight and zero bias.
std::vector<float> cpu_layer_norm(const std::vector<float>& x, int M, int K) {
  std::vector<float> ones(size_t(K), 1.0f), zeros(size_t(K), 0.0f), out(x.size());
  kr::layer_norm(x.data(), ones.data(), zeros.data(), out.data(), M, K, kEps);
  return out;
}

// Device row sums of w [N, K] (InputNorm::row_sums of an unfolded LayerNorm).
template <typename T>
Dev<float> device_row_sums(const Dev<T>& w, int N, int K) {
  Dev<float> sums{size_t(N)};
  kc::row_dots<T>({w.p, nullptr, N, K}, nullptr, sums.p, nullptr);
  return sums;  // moved
}

// (N, K): one partial tile, ragged tiles, a partial last k-step, Llama's o / down shapes.
const std::vector<std::pair<int, int>> kShapes = {
    {7, 40}, {33, 4104}, {1000, 512}, {4096, 4096}, {129, 11008}};

// The first `rows` rows of a row-major [*, cols] matrix.
std::vector<float> first_rows(const std::vector<float>& m, int rows, int cols) {
  return std::vector<float>(m.begin(), m.begin() + long(rows) * cols);
}

// Cost: the rows of these products are independent (row m of the output reads only row m of x;
// the norm is per row), so each shape draws and uploads its weights once and computes the CPU
// reference of kSkinnyMaxRows rows once; every row count M is checked against the first M rows.
// (Drawing the weights again for every M, kind and bias drew ~3.5e9 normal values a type.)
// RMSNorm input, then LayerNorm input, whose mean comes out through the row sums. x's mean is
// larger than its spread, so a result that skipped the scale or the centering (or took the wrong
// sums) would be far off.
TYPED_TEST(FusedGemvCuda, NormInputMatchesNormThenLinear) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(1);
  constexpr int kRows = kc::kSkinnyMaxRows;
  for (auto [N, K] : kShapes) {
    const auto x = test::randn<T>(size_t(kRows) * K, rng, 1.0f, 2.0f);
    const auto w = test::randn<T>(size_t(N) * K, rng, 0.05f);
    Dev<T> dx(x.size()), dw(w.size()), dy(size_t(kRows) * N);
    dx.upload(x);
    dw.upload(w);
    const Dev<float> sums = device_row_sums(dw, N, K);
    for (bool layer : {false, true}) {
      const auto normed = layer ? cpu_layer_norm(x, kRows, K) : cpu_rms(x, kRows, K);
      const auto ref = cpu_linear(normed, w, kRows, N, K);
      for (int M = 1; M <= kRows; ++M) {
        dy.poison();
        kc::skinny_linear_norm<T>(dx.p, {kEps, layer ? sums.p : nullptr}, {dw.p, nullptr, N, K},
                                  dy.p, M, nullptr);
        LMX_CUDA_OK(cudaDeviceSynchronize());
        const auto got = test::written_prefix(dy.download_f(), size_t(M) * N);
        ASSERT_LT(rel_l2(got, first_rows(ref, M, N)), Tol<T>::rel)
            << (layer ? "layer " : "rms ") << M << "x" << N << "x" << K;
      }
    }
  }
}

// y = act(norm(x) W^T + bias): every activation, with and without the bias, RMSNorm and
// LayerNorm input.
TYPED_TEST(FusedGemvCuda, NormActMatchesNormLinearBiasActivation) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(8);
  using A = kernels::ActivationKind;
  constexpr int kRows = 8;  // the largest M below
  for (auto [N, K] : {std::pair{7, 40}, {1000, 4104}, {16384, 4096}}) {
    const auto x = test::randn<T>(size_t(kRows) * K, rng, 1.0f, 1.5f);
    const auto w = test::randn<T>(size_t(N) * K, rng, 0.05f);
    const auto bias = test::randn<T>(size_t(N), rng, 0.5f);
    Dev<T> dx(x.size()), dw(w.size()), db(bias.size()), dy(size_t(kRows) * N);
    dx.upload(x);
    dw.upload(w);
    db.upload(bias);
    const Dev<float> sums = device_row_sums(dw, N, K);
    for (bool layer : {false, true}) {
      const auto product = cpu_linear(layer ? cpu_layer_norm(x, kRows, K) : cpu_rms(x, kRows, K),
                                      w, kRows, N, K);
      for (A kind : {A::Silu, A::GeluTanh, A::GeluExact, A::Relu})
        for (bool with_bias : {false, true})
          for (int M : {1, 3, 8}) {
            std::vector<float> ref(size_t(M) * N);
            kr::bias_add(product.data(), with_bias ? bias.data() : nullptr, nullptr, ref.data(), M,
                         N);
            kr::act(kind, ref.data(), ref.data(), M, N);
            dy.poison();
            kc::skinny_linear_norm_act<T>(kind, dx.p, {kEps, layer ? sums.p : nullptr},
                                          {dw.p, with_bias ? db.p : nullptr, N, K}, dy.p, M,
                                          nullptr);
            LMX_CUDA_OK(cudaDeviceSynchronize());
            ASSERT_LT(rel_l2(test::written_prefix(dy.download_f(), ref.size()), ref), Tol<T>::rel)
                << (layer ? "layer" : "rms") << " kind " << int(kind) << " bias " << with_bias
                << " " << M << "x" << N << "x" << K;
          }
    }
  }
}

TYPED_TEST(FusedGemvCuda, RmsGatedMatchesNormLinearActivation) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(2);
  using A = kernels::ActivationKind;
  constexpr int kRows = 8;  // the largest M below
  for (auto [inter, K] : {std::pair{5, 40}, {67, 512}, {1000, 4104}, {11008, 4096}}) {
    const auto x = test::randn<T>(size_t(kRows) * K, rng, 2.0f);
    const auto w = test::randn<T>(size_t(2 * inter) * K, rng, 0.05f);
    const auto bias = test::randn<T>(size_t(2 * inter), rng, 0.5f);
    const auto gate_up = cpu_linear(cpu_rms(x, kRows, K), w, kRows, 2 * inter, K);
    Dev<T> dx(x.size()), dw(w.size()), db(bias.size()), dy(size_t(kRows) * inter);
    dx.upload(x);
    dw.upload(w);
    db.upload(bias);
    for (A kind : {A::Silu, A::GeluTanh, A::GeluExact, A::Relu})
      for (bool with_bias : {false, true})
        for (int M : {1, 3, 8}) {
          std::vector<float> ref(size_t(M) * inter);
          kr::bias_gated_act(kind, gate_up.data(), with_bias ? bias.data() : nullptr, ref.data(),
                             M, inter);
          dy.poison();
          kc::skinny_linear_norm_gated<T>(
              kind, dx.p, {kEps}, {dw.p, with_bias ? db.p : nullptr, 2 * inter, K}, dy.p, M, nullptr);
          LMX_CUDA_OK(cudaDeviceSynchronize());
          ASSERT_LT(rel_l2(test::written_prefix(dy.download_f(), ref.size()), ref), Tol<T>::rel)
              << "kind " << int(kind) << " bias " << with_bias << " " << M << "x" << inter << "x"
              << K;
        }
  }
}

TYPED_TEST(FusedGemvCuda, AddUpdatesTheResidualInPlace) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(3);
  constexpr int kRows = kc::kSkinnyMaxRows;
  for (auto [N, K] : kShapes) {
    const auto x = test::randn<T>(size_t(kRows) * K, rng);
    const auto w = test::randn<T>(size_t(N) * K, rng, 0.05f);
    const auto bias = test::randn<T>(size_t(N), rng);
    const auto residual = test::randn<T>(size_t(kRows) * N, rng, 4.0f);
    const auto product = cpu_linear(x, w, kRows, N, K);  // [kRows, N]
    Dev<T> dx(x.size()), dw(w.size()), db(bias.size());
    dx.upload(x);
    dw.upload(w);
    db.upload(bias);
    for (bool with_bias : {false, true})
      for (int M = 1; M <= kRows; ++M) {
        std::vector<float> ref(size_t(M) * N);
        kr::bias_add(product.data(), with_bias ? bias.data() : nullptr, residual.data(), ref.data(),
                     M, N);
        Dev<T> dr(ref.size());  // updated in place: a fresh copy of the first M rows a case
        dr.upload(first_rows(residual, M, N));
        kc::skinny_linear_add<T>(dx.p, {dw.p, with_bias ? db.p : nullptr, N, K}, dr.p, M, nullptr);
        LMX_CUDA_OK(cudaDeviceSynchronize());
        ASSERT_LT(rel_l2(dr.download_f(), ref), Tol<T>::rel)
            << "bias " << with_bias << " " << M << "x" << N << "x" << K;
      }
  }
}

TYPED_TEST(FusedGemvCuda, ScaleColumnsMatchesCpu) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(4);
  for (auto [rows, cols] : {std::pair{1, 1}, {7, 13}, {12288, 4096}}) {
    const auto w = test::randn<T>(size_t(rows) * cols, rng);
    const auto scale = test::randn<T>(size_t(cols), rng, 0.3f, 1.0f);
    auto ref = w;
    kr::scale_columns(ref.data(), scale.data(), rows, cols);
    Dev<T> dw(w.size()), ds(scale.size());
    dw.upload(w);
    ds.upload(scale);
    kc::scale_columns<T>(dw.p, ds.p, rows, cols, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_LT(rel_l2(dw.download_f(), ref), Tol<T>::rel) << rows << "x" << cols;
  }
}

// The contract the backend relies on: folding an RMSNorm's weight into w, then the rms form,
// equals the norm (with its weight) then the linear. One more rounding (of the folded weights)
// than the norm-then-linear path has: still within Tol<T>.
TYPED_TEST(FusedGemvCuda, FoldedNormWeightMatchesRmsNormThenLinear) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(5);
  const int N = 1000, K = 4096;
  for (int M : {1, 8}) {
    const auto x = test::randn<T>(size_t(M) * K, rng, 2.0f);
    const auto w = test::randn<T>(size_t(N) * K, rng, 0.05f);
    const auto gamma = test::randn<T>(size_t(K), rng, 0.3f, 1.0f);
    std::vector<float> normed(x.size());
    kr::rms_norm(x.data(), gamma.data(), normed.data(), M, K, kEps);
    const auto ref = cpu_linear(normed, w, M, N, K);
    Dev<T> dx(x.size()), dw(w.size()), dg(gamma.size()), dy(ref.size());
    dx.upload(x);
    dw.upload(w);
    dg.upload(gamma);
    kc::scale_columns<T>(dw.p, dg.p, N, K, nullptr);
    kc::skinny_linear_norm<T>(dx.p, {kEps}, {dw.p, nullptr, N, K}, dy.p, M, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_LT(rel_l2(dy.download_f(), ref), Tol<T>::rel) << M;
  }
}

// The load's LayerNorm fold (engine/backend/cuda/device_weights.cpp) and the kernel together: the
// bias b + W beta (row_dots with beta, before the columns are scaled), W diag(gamma)
// (scale_columns), the row sums of the folded weight (row_dots), then the LayerNorm input form
// with the bias in its epilogue, equal the norm (with its weight and bias) then the linear and
// the bias. Relu as the activation keeps the comparison close to linear (half the outputs pass).
TYPED_TEST(FusedGemvCuda, FoldedLayerNormMatchesLayerNormThenLinear) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(9);
  const int N = 1000, K = 4096;
  for (int M : {1, 8}) {
    const auto x = test::randn<T>(size_t(M) * K, rng, 2.0f, 1.0f);
    const auto w = test::randn<T>(size_t(N) * K, rng, 0.05f);
    const auto bias = test::randn<T>(size_t(N), rng, 0.5f);
    const auto gamma = test::randn<T>(size_t(K), rng, 0.3f, 1.0f);
    const auto beta = test::randn<T>(size_t(K), rng, 0.5f);
    std::vector<float> normed(x.size()), ref(size_t(M) * N);
    kr::layer_norm(x.data(), gamma.data(), beta.data(), normed.data(), M, K, kEps);
    const auto product = cpu_linear(normed, w, M, N, K);
    kr::bias_add(product.data(), bias.data(), nullptr, ref.data(), M, N);
    kr::act(kernels::ActivationKind::Relu, ref.data(), ref.data(), M, N);

    Dev<T> dx(x.size()), dw(w.size()), dg(gamma.size()), dbeta(beta.size()), db(bias.size()),
        dy(ref.size());
    dx.upload(x);
    dw.upload(w);
    dg.upload(gamma);
    dbeta.upload(beta);
    Dev<float> w_beta{size_t(N)};
    kc::row_dots<T>({dw.p, nullptr, N, K}, dbeta.p, w_beta.p, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    const auto shift = w_beta.download_f();
    std::vector<float> folded_bias(static_cast<size_t>(N));
    for (int n = 0; n < N; ++n) folded_bias[size_t(n)] = bias[size_t(n)] + shift[size_t(n)];
    db.upload(folded_bias);
    kc::scale_columns<T>(dw.p, dg.p, N, K, nullptr);
    const Dev<float> sums = device_row_sums(dw, N, K);
    kc::skinny_linear_norm_act<T>(kernels::ActivationKind::Relu, dx.p, {kEps, sums.p},
                                  {dw.p, db.p, N, K}, dy.p, M, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_LT(rel_l2(dy.download_f(), ref), Tol<T>::rel) << M;
  }
}

// row_dots against the CPU's, on T weights, with a vector and without (the row sums).
TYPED_TEST(FusedGemvCuda, RowDotsMatchCpu) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(10);
  for (auto [N, K] : {std::pair{1, 1}, {7, 13}, {4096, 4096}}) {
    const auto w = test::randn<T>(size_t(N) * K, rng, 0.05f, 0.01f);
    const auto v = test::randn<T>(size_t(K), rng);
    Dev<T> dw(w.size()), dv(v.size());
    Dev<float> dout{size_t(N)};
    dw.upload(w);
    dv.upload(v);
    for (bool with_v : {false, true}) {
      std::vector<float> ref(static_cast<size_t>(N));
      kr::row_dots({w.data(), nullptr, N, K}, with_v ? v.data() : nullptr, ref.data());
      kc::row_dots<T>({dw.p, nullptr, N, K}, with_v ? dv.p : nullptr, dout.p, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_LT(rel_l2(dout.download_f(), ref), 1e-5) << "v " << with_v << " " << N << "x" << K;
    }
  }
}

// The rope epilogue against the CPU's norm, linear and rope_write_kv: q (rotated) in qkv, k and v
// in the cache slots of each token; a padding row (token_seq -1) writes no cache. Full and
// partial rotary, MHA and GQA, with and without the qkv bias; a cache of T, and an fp8 (E4M3)
// cache (reference: round_to_e4m3 of its fp32 values; an fp32 result a bit off can round to the
// neighbouring E4M3 value, so the cache tolerance there is 5e-3).
// scale: the cache's dequantization scales (the GPU's codes times them against the CPU's cache).
template <typename T, typename C>
void run_rope_epilogue(kernels::KvDtype storage, double cache_tol, kernels::KvScale scale = {}) {
  std::mt19937 rng(6);
  struct Case {
    int heads, kv_heads, head_dim, rotary_dim, K;
  };
  for (const Case c : {Case{4, 4, 64, 64, 256}, Case{8, 2, 128, 128, 1032},
                       Case{3, 1, 128, 32, 512}, Case{32, 32, 128, 128, 4096}}) {
    ASSERT_TRUE(kc::rope_epilogue_supported(c.rotary_dim, c.head_dim));
    const int D = c.head_dim, q_size = c.heads * D, kv_size = c.kv_heads * D;
    const int N = q_size + 2 * kv_size, K = c.K;
    // The weights (12288 x 4096 for the last case) drawn and uploaded once a case, not per M /
    // bias.
    const auto w = test::randn<T>(size_t(N) * K, rng, 0.05f);
    const auto bias = test::randn<T>(size_t(N), rng, 0.5f);
    Dev<T> dw(w.size()), db(bias.size());
    dw.upload(w);
    db.upload(bias);
    for (bool with_bias : {false, true})
      for (int M : {1, 5, 8}) {
        const kernels::PagedKvLayout L{4, c.kv_heads, D, 8, scale};  // 4-token blocks, 8 a sequence
        const int blocks = M * L.max_blocks_per_seq;
        std::vector<int32_t> pos(static_cast<size_t>(M)), seq(pos), tables(static_cast<size_t>(blocks));
        for (int b = 0; b < blocks; ++b) tables[size_t(b)] = (b * 7 + 3) % blocks;  // scattered
        for (int m = 0; m < M; ++m) {
          seq[size_t(m)] = m == 3 ? -1 : m;  // row 3: a padding row
          pos[size_t(m)] = int32_t((m * 13 + 5) % (4 * L.max_blocks_per_seq));
        }
        std::vector<float> inv_freq(size_t(c.rotary_dim / 2));
        for (size_t i = 0; i < inv_freq.size(); ++i)
          inv_freq[i] = std::pow(10000.0f, -2.0f * float(i) / float(c.rotary_dim));
        const auto x = test::randn<T>(size_t(M) * K, rng, 2.0f);
        const size_t cache_elems = size_t(blocks) * L.block_size * kv_size;

        auto qkv = cpu_linear(cpu_rms(x, M, K), w, M, N, K);
        std::vector<float> k_ref(cache_elems, 0.0f), v_ref(cache_elems, 0.0f);
        kr::rope_write_kv(qkv.data(), N, with_bias ? bias.data() : nullptr, pos.data(),
                          inv_freq.data(), c.rotary_dim, c.heads, k_ref.data(), v_ref.data(),
                          tables.data(), seq.data(), M, L, storage);
        std::vector<float> q_ref;
        for (int m = 0; m < M; ++m)
          q_ref.insert(q_ref.end(), qkv.begin() + size_t(m) * N,
                       qkv.begin() + size_t(m) * N + q_size);

        Dev<T> dx(x.size()), dqkv(size_t(M) * N);
        Dev<C> dk(cache_elems), dv(cache_elems);
        Dev<float> dfreq(inv_freq.size());
        Dev<int32_t> dpos(pos.size()), dseq(seq.size()), dtab(tables.size());
        dx.upload(x);
        dk.upload(std::vector<float>(cache_elems, 0.0f));
        dv.upload(std::vector<float>(cache_elems, 0.0f));
        dfreq.upload(inv_freq);
        dpos.upload(pos);
        dseq.upload(seq);
        dtab.upload(tables);
        kc::skinny_linear_norm_rope_kv<T>(dx.p, {kEps}, {dw.p, with_bias ? db.p : nullptr, N, K},
                                         dqkv.p, dpos.p, dfreq.p, c.rotary_dim, c.heads, dk.p, dv.p,
                                         dtab.p, dseq.p, M, L, nullptr);
        LMX_CUDA_OK(cudaDeviceSynchronize());
        const auto qkv_got = dqkv.download_f();
        std::vector<float> q_got;
        for (int m = 0; m < M; ++m)
          q_got.insert(q_got.end(), qkv_got.begin() + size_t(m) * N,
                       qkv_got.begin() + size_t(m) * N + q_size);
        const std::string where = "heads " + std::to_string(c.heads) + "/" +
                                  std::to_string(c.kv_heads) + " rotary " +
                                  std::to_string(c.rotary_dim) + " bias " +
                                  std::to_string(with_bias) + " M " + std::to_string(M);
        EXPECT_LT(rel_l2(q_got, q_ref), Tol<T>::rel) << "q, " << where;
        auto k_got = dk.download_f(), v_got = dv.download_f();
        for (float& x : k_got) x *= scale.k;
        for (float& x : v_got) x *= scale.v;
        EXPECT_LT(rel_l2(k_got, k_ref), cache_tol) << "k cache, " << where;
        EXPECT_LT(rel_l2(v_got, v_ref), cache_tol) << "v cache, " << where;
        if (::testing::Test::HasFailure()) return;  // one failing case is enough to read
      }
  }
}

TYPED_TEST(FusedGemvCuda, RopeEpilogueMatchesRopeWriteKv) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  run_rope_epilogue<T, T>(kernels::KvDtype::model, Tol<T>::rel);
  run_rope_epilogue<T, __nv_fp8_e4m3>(kernels::KvDtype::fp8_e4m3, std::max(Tol<T>::rel, 5e-3));
}

// The epilogue's cache write with per-layer fp8 scales: K stored as codes of x / 0.25, V of
// x / 2 (powers of two: no rounding beyond E4M3's), read back times the scales.
TYPED_TEST(FusedGemvCuda, RopeEpilogueWritesScaledFp8Cache) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  run_rope_epilogue<T, __nv_fp8_e4m3>(kernels::KvDtype::fp8_e4m3, std::max(Tol<T>::rel, 5e-3),
                                      {0.25f, 2.0f});
}

}  // namespace
}  // namespace lmx
