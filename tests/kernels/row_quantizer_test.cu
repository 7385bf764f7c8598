// The row quantizers on the GPU (kernels/quantize.h) against their CPU references, byte for byte:
// from the same values every code and every row scale equal the reference's.
//  - int8 (quantize_rows_int8): the activation reference quant::cpu::quantize_rows_int8, plain
//    and with smoothquant's 1/s column factors (0.05 .. 20), and, plain, the weight reference
//    quant::cpu::quantize_int8 with one group a row (what dynamic_int8 does at load);
//  - E4M3 (quantize_rows_e4m3): quant::cpu::quantize_rows_e4m3 (fp8's activations and weights).
// Each shape has an all-zero row (scale 0), an outlier and a value past E4M3's range before
// scaling. Shapes: one row, K below one block's width, K not a multiple of 8 or of a block,
// Llama's hidden / intermediate widths, 4096 rows.
// (Rows padded to the GEMM's K: tests/kernels/fp8_linear_test.cu, QuantizeRowsPadsWithZeroCodes.)
// And encode_rows_e4m3 (no scaling) against kernels::cpu::encode_e4m3, and the quantizers fused
// with the MLP's activation (quantize_act_rows_*) against the activation kernel followed by the
// quantizer, byte for byte, and the quantizers fused with the pre-norm residual add and norm
// (quantize_add_norm_rows_*) against add_rms_norm / add_layer_norm followed by the quantizer.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/activation.h"
#include "kernels/int8_layout.h"
#include "kernels/kv_dtype.h"
#include "kernels/norm.h"
#include "kernels/quantize.h"
#include "quant/fp8.h"
#include "quant/int8.h"
#include "quant/w8a8.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

using test::Dev;
namespace kc = kernels::cuda;

struct Int8Rows {
  using Code = int8_t;
  static constexpr bool kSmoothing = true;
  static constexpr bool kWeightReference = true;
  static void reference(const float* x, const float* inv_smooth, int M, int K, Code* q, float* s) {
    quant::cpu::quantize_rows_int8(x, inv_smooth, M, K, q, s);
  }
  static void weight_reference(const float* w, int N, int K, Code* q, float* s) {
    quant::cpu::quantize_int8("w", w, N, K, K, q, s);
  }
  template <typename T>
  static void device(const T* x, const float* inv_smooth, Code* q, float* s, int M, int K) {
    kc::quantize_rows_int8<T>(x, inv_smooth, q, s, M, K, nullptr);
  }
  // Rows of ld >= K codes; the activation of in [M, K] or, gated, [M, 2K] (+ bias) fused.
  template <typename T>
  static void device(const T* x, const float* inv_smooth, Code* q, float* s, int M, int K, int ld) {
    kc::quantize_rows_int8<T>(x, inv_smooth, q, s, M, K, ld, nullptr);
  }
  template <typename T>
  static void act(kc::MlpActivation act, const T* in, const T* bias, const float* inv_smooth,
                  Code* q, float* s, int M, int K, int ld) {
    kc::quantize_act_rows_int8<T>(act, in, bias, inv_smooth, q, s, M, K, ld, nullptr);
  }
  template <typename T>
  static bool add_norm(const kc::AddNorm<T>& norm, const float* inv_smooth, Code* q, float* s,
                       int M, int K, int ld) {
    return kc::quantize_add_norm_rows_int8<T>(norm, inv_smooth, q, s, M, K, ld, nullptr);
  }
  // The device's rows (kernels/int8_layout.h's order) in column order.
  static std::vector<Code> in_column_order(const std::vector<Code>& stored, int M, int K) {
    std::vector<Code> q(stored.size());
    kernels::from_int8_layout(stored.data(), q.data(), size_t(M), K);
    return q;
  }
};

struct E4m3Rows {
  using Code = uint8_t;
  static constexpr bool kSmoothing = false;
  static constexpr bool kWeightReference = false;
  static void reference(const float* x, const float*, int M, int K, Code* q, float* s) {
    quant::cpu::quantize_rows_e4m3("x", x, M, K, q, s);
  }
  static void weight_reference(const float*, int, int, Code*, float*) {}
  template <typename T>
  static void device(const T* x, const float*, Code* q, float* s, int M, int K) {
    kc::quantize_rows_e4m3<T>(x, q, s, M, K, K, nullptr);
  }
  template <typename T>
  static void device(const T* x, const float*, Code* q, float* s, int M, int K, int ld) {
    kc::quantize_rows_e4m3<T>(x, q, s, M, K, ld, nullptr);
  }
  template <typename T>
  static void act(kc::MlpActivation act, const T* in, const T* bias, const float*, Code* q,
                  float* s, int M, int K, int ld) {
    kc::quantize_act_rows_e4m3<T>(act, in, bias, q, s, M, K, ld, nullptr);
  }
  template <typename T>
  static bool add_norm(const kc::AddNorm<T>& norm, const float*, Code* q, float* s, int M, int K,
                       int ld) {
    return kc::quantize_add_norm_rows_e4m3<T>(norm, q, s, M, K, ld, nullptr);
  }
  static std::vector<Code> in_column_order(const std::vector<Code>& stored, int, int) {
    return stored;
  }
};

// Smoothing factors of the size SmoothQuant makes (max|X|^a / max|W|^(1-a)): 0.05 .. 20, as 1/s.
std::vector<float> inverse_smoothing(int K, std::mt19937& rng) {
  std::uniform_real_distribution<float> e(-3.0f, 3.0f);
  std::vector<float> inv(static_cast<size_t>(K));
  for (float& v : inv) v = 1.0f / std::exp(e(rng));
  return inv;
}

// P: std::pair<T (the values' type), the format's traits>.
template <typename P>
class RowQuantizerCuda : public ::testing::Test {};
using Params = ::testing::Types<std::pair<float, Int8Rows>, std::pair<__half, Int8Rows>,
                                std::pair<__nv_bfloat16, Int8Rows>, std::pair<float, E4m3Rows>,
                                std::pair<__half, E4m3Rows>, std::pair<__nv_bfloat16, E4m3Rows>>;
TYPED_TEST_SUITE(RowQuantizerCuda, Params);

TYPED_TEST(RowQuantizerCuda, GivesTheReferenceBytesAndScales) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::first_type;
  using F = typename TypeParam::second_type;
  using Code = typename F::Code;
  std::mt19937 rng(31);
  // (K = 40 and 2056: a last half group of 8 columns, stored in column order; at 2056 the half
  // lies past the first 256 threads, with no neighbour.)
  for (auto [M, K] : {std::pair{1, 64}, {7, 48}, {5, 40}, {7, 4096}, {300, 96}, {33, 4112},
                      {9, 2056}, {33, 11008}, {1000, 512}, {129, 11008}, {4096, 4096}}) {
    auto x = test::randn<T>(size_t(M) * K, rng);
    for (int k = 0; k < K; ++k) x[size_t(M / 2) * K + k] = 0.0f;  // an all-zero row: scale 0
    x[3] = 40.0f;                                                 // an outlier
    x[size_t(M - 1) * K] = float(T(3000.0f));                     // past 448 before scaling
    const auto inv = inverse_smoothing(K, rng);
    Dev<T> dx(x.size());
    Dev<float> dinv(inv.size());
    dx.upload(x);
    dinv.upload(inv);
    for (const bool smoothed : {false, true}) {
      if (smoothed && !F::kSmoothing) continue;
      const std::string where =
          std::to_string(M) + "x" + std::to_string(K) + (smoothed ? " smoothed" : "");
      const float* inv_host = smoothed ? inv.data() : nullptr;
      std::vector<Code> q(x.size());
      std::vector<float> s(static_cast<size_t>(M));
      F::reference(x.data(), inv_host, M, K, q.data(), s.data());
      Dev<Code> dq(q.size());
      Dev<float> ds(s.size());
      F::template device<T>(dx.p, smoothed ? dinv.p : nullptr, dq.p, ds.p, M, K);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      const auto got_q = F::in_column_order(dq.download(), M, K);
      const auto got_s = ds.download();
      ASSERT_EQ(got_q, q) << where;
      ASSERT_EQ(got_s, s) << where;
      if (F::kWeightReference && !smoothed) {
        F::weight_reference(x.data(), M, K, q.data(), s.data());
        ASSERT_EQ(got_q, q) << where << " (the weight reference)";
        ASSERT_EQ(got_s, s) << where << " (the weight reference)";
      }
    }
  }
}

// The quantizers over the MLP's activation (quantize_act_rows_*: the down projection's input of
// smoothquant and fp8) give the bytes and scales of bias_gated_act / bias_act followed by the
// row quantizer: gated and plain, with and without a bias and (int8) smoothquant's 1/s, SiLU,
// tanh-GELU and ReLU, rows held in registers short (4096) and long (11008, 14336), K not a
// multiple of 8 (the general kernel), codes padded past K (int8: the general kernel; E4M3: zero
// codes after the held row), an all-zero row (gated).
TYPED_TEST(RowQuantizerCuda, ActivationFusedGivesTheTwoStepBytes) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::first_type;
  using F = typename TypeParam::second_type;
  using Code = typename F::Code;
  using kernels::ActivationKind;
  std::mt19937 rng(37);
  struct Shape {
    int M, K, ld;
  };
  for (const Shape shape : {Shape{1, 64, 64}, {5, 40, 40}, {3, 100, 100}, {7, 4096, 4096},
                            {33, 11008, 11008}, {17, 14336, 14336}, {9, 2056, 2056},
                            {6, 96, 112}, {300, 4096, 4096}, {2, 11008, 11024}}) {
    const auto [M, K, ld] = shape;
    auto in = test::randn<T>(size_t(M) * 2 * K, rng, 2.0f);
    const int zero_row = M - 1;  // up 0: an all-zero row without the bias (M > 1)
    if (M > 1)
      for (int k = 0; k < K; ++k) in[size_t(zero_row) * 2 * K + K + k] = 0.0f;
    in[5] = 30.0f;  // an outlier gate
    const auto bias = test::randn<T>(size_t(2) * K, rng, 0.5f);
    const auto inv = inverse_smoothing(K, rng);
    Dev<T> din(in.size()), dbias(bias.size()), act(size_t(M) * K);
    Dev<float> dinv(inv.size());
    din.upload(in);
    dbias.upload(bias);
    dinv.upload(inv);
    for (const auto kind : {ActivationKind::Silu, ActivationKind::GeluTanh, ActivationKind::Relu})
      for (const bool gated : {true, false})
        for (const bool biased : {false, true})
          for (const bool smoothed : {false, true}) {
            if (smoothed && !F::kSmoothing) continue;
            const std::string where = std::to_string(M) + "x" + std::to_string(K) + " ld " +
                                      std::to_string(ld) + (gated ? " gated" : " plain") +
                                      (biased ? " biased" : "") + (smoothed ? " smoothed" : "") +
                                      " kind " + std::to_string(int(kind));
            const T* b = biased ? dbias.p : nullptr;
            const float* c = smoothed ? dinv.p : nullptr;
            Dev<Code> want_q{size_t(M) * ld}, got_q{size_t(M) * ld};
            Dev<float> want_s{size_t(M)}, got_s{size_t(M)};
            // plain: din's first M x K values as [M, K], the bias's first K
            if (gated)
              kc::bias_gated_act<T>(kind, din.p, b, act.p, M, K, nullptr);
            else
              kc::bias_act<T>(kind, din.p, b, act.p, M, K, nullptr);
            F::template device<T>(act.p, c, want_q.p, want_s.p, M, K, ld);
            F::template act<T>({kind, gated}, din.p, b, c, got_q.p, got_s.p, M, K, ld);
            LMX_CUDA_OK(cudaDeviceSynchronize());
            ASSERT_EQ(got_q.download(), want_q.download()) << where;
            ASSERT_EQ(got_s.download(), want_s.download()) << where;
            const auto s = got_s.download();
            if (gated && M > 1 && !biased)
              EXPECT_EQ(s[size_t(zero_row)], 0.0f) << where << " (the zero row)";
            EXPECT_GT(s[0], 0.0f) << where;
          }
  }
}

// The quantizers fused with a pre-norm block's residual add and norm (quantize_add_norm_rows_*)
// leave the residual and give the codes and scales of add_rms_norm / add_layer_norm followed by
// the row quantizer, byte for byte: RMSNorm and LayerNorm, with and without the delta and (int8)
// smoothquant's 1/s, rows of one 16-byte piece a thread (40, 64, 4096 columns) and of two (5120,
// 8192), E4M3 rows padded past K; and they launch nothing, returning false, where they do not
// apply (float rows, K not a multiple of 8, past 8192 columns, int8 rows padded past K).
TYPED_TEST(RowQuantizerCuda, AddNormFusedGivesTheTwoStepBytes) {
  LMX_REQUIRE_GPU();
  using T = typename TypeParam::first_type;
  using F = typename TypeParam::second_type;
  using Code = typename F::Code;
  std::mt19937 rng(43);
  struct Shape {
    int M, K, ld;
    bool fused;  // whether the fused kernel applies (16-bit T)
  };
  const bool int8 = F::kSmoothing;
  for (const Shape shape : {Shape{3, 40, 40, true}, {1, 64, 64, true}, {300, 4096, 4096, true},
                            {7, 5120, 5120, true}, {33, 8192, 8192, true},
                            {5, 4096, 4112, !int8}, {4, 100, 100, false},
                            {2, 8200, 8200, false}}) {
    const auto [M, K, ld, applies] = shape;
    const bool fused = applies && sizeof(T) == 2;
    const auto residual = test::randn<T>(size_t(M) * K, rng, 3.0f);
    const auto delta = test::randn<T>(size_t(M) * K, rng, 1.0f);
    const auto weight = test::randn<T>(size_t(K), rng, 0.5f, 1.0f);
    const auto bias = test::randn<T>(size_t(K), rng, 0.2f);
    const auto inv = inverse_smoothing(K, rng);
    Dev<T> dw(weight.size()), db(bias.size()), dd(delta.size()), normed(residual.size());
    Dev<float> dinv(inv.size());
    dw.upload(weight);
    db.upload(bias);
    dd.upload(delta);
    dinv.upload(inv);
    for (const bool layer : {false, true})
      for (const bool with_delta : {false, true})
        for (const bool smoothed : {false, true}) {
          if (smoothed && !F::kSmoothing) continue;
          const std::string where = std::to_string(M) + "x" + std::to_string(K) + " ld " +
                                    std::to_string(ld) + (layer ? " LayerNorm" : " RMSNorm") +
                                    (with_delta ? " delta" : "") + (smoothed ? " smoothed" : "");
          Dev<T> want_r{residual.size()}, got_r{residual.size()};
          want_r.upload(residual);
          got_r.upload(residual);
          const T* d = with_delta ? dd.p : nullptr;
          const float* c = smoothed ? dinv.p : nullptr;
          Dev<Code> want_q{size_t(M) * ld}, got_q{size_t(M) * ld};
          Dev<float> want_s{size_t(M)}, got_s{size_t(M)};
          const kc::AddNorm<T> norm{got_r.p, d, dw.p, layer ? db.p : nullptr, 1e-5f, layer};
          const bool launched = F::template add_norm<T>(norm, c, got_q.p, got_s.p, M, K, ld);
          ASSERT_EQ(launched, fused) << where;
          if (!fused) continue;
          if (layer)
            kc::add_layer_norm<T>(want_r.p, d, dw.p, db.p, normed.p, M, K, 1e-5f, nullptr);
          else
            kc::add_rms_norm<T>(want_r.p, d, dw.p, normed.p, M, K, 1e-5f, nullptr);
          F::template device<T>(normed.p, c, want_q.p, want_s.p, M, K, ld);
          LMX_CUDA_OK(cudaDeviceSynchronize());
          ASSERT_EQ(got_r.download(), want_r.download()) << where << " (the residual)";
          ASSERT_EQ(got_q.download(), want_q.download()) << where;
          ASSERT_EQ(got_s.download(), want_s.download()) << where;
        }
  }
}

// encode_rows_e4m3: every value's E4M3 code, unscaled, as kernels/kv_dtype.h's encode_e4m3 (an
// fp8 checkpoint's weights arrive as their codes' values): every finite code's value and values
// between and past them, rows padded with zero codes to a wider stride.
template <typename T>
class EncodeRowsE4m3Cuda : public ::testing::Test {};
using ValueTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(EncodeRowsE4m3Cuda, ValueTypes);

TYPED_TEST(EncodeRowsE4m3Cuda, GivesTheReferenceCodesAndZeroPadding) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::vector<float> x;
  for (int code = 0; code < 256; ++code) {
    const float v = kernels::cpu::decode_e4m3(uint8_t(code));
    if (std::isfinite(v)) x.push_back(v);
  }
  std::mt19937 rng(41);
  const auto more = test::randn<T>(5 * 97, rng, 100.0f);  // N(0, 100): past 448 too
  x.insert(x.end(), more.begin(), more.end());
  const int cols = 97, rows = int(x.size()) / cols, ld = 112;
  x.resize(size_t(rows) * cols);
  for (float& v : x) v = float(T(v));  // the values T holds
  std::vector<uint8_t> want(size_t(rows) * ld, 0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      want[size_t(r) * ld + c] = kernels::cpu::encode_e4m3(x[size_t(r) * cols + c]);
  Dev<T> dx(x.size());
  Dev<uint8_t> dq(want.size());
  dx.upload(x);
  kc::encode_rows_e4m3<T>(dx.p, dq.p, rows, cols, ld, nullptr);
  LMX_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(dq.download(), want);
}

}  // namespace
}  // namespace lmx
