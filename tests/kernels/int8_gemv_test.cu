// dynamic_int8 on the GPU against its CPU reference (quant/int8.h):
//  - (quantize_rows_int8 gives the reference's bytes and scales: tests/kernels/row_quantizer_test.cu);
//  - dequantize_rows_int8 gives dequant(W) rounded once to T;
// (the decode GEMV on int8 weights: tests/kernels/byte_weight_gemv_test.cu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/quantize.h"
#include "quant/int8.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/quantized_weights.h"

namespace lmx {
namespace {

using test::Dev;
using test::rel_l2;
using test::Tol;
namespace kc = kernels::cuda;

template <typename T>
class Int8Cuda : public ::testing::Test {};
using AllTypes = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(Int8Cuda, AllTypes);

TYPED_TEST(Int8Cuda, DequantizeRowsIsOneRounding) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(12);
  // Rows of whole groups of 16 (a thread a group) and rows ending in a partial group (kept in
  // column order: kernels/int8_layout.h).
  for (const int K : {4112, 86}) {
    const int N = 129;
    const test::Int8Weight<> w(test::randn<float>(size_t(N) * K, rng, 0.05f), N, K);
    std::vector<float> ref(size_t(N) * K);
    quant::cpu::dequantize_int8(w.ref(), ref.data());
    Dev<T> out(ref.size());
    kc::dequantize_rows_int8<T>(w.dq.p, w.ds.p, out.p, N, K, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_LT(rel_l2(out.download_f(), ref), Tol<T>::rel) << "K " << K;
  }
}

}  // namespace
}  // namespace lmx
