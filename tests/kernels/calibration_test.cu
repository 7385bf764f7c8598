// Calibration's reductions (kernels/calibration.h) on the GPU against the CPU reference: column
// maxima bit for bit (a max is exact) with NaN and infinities where they occur, strided rows and
// a running maximum to fold into; the squared-error sums to fp64 rounding (another order: 1e-9
// relative over 3M terms); conversions exact.
#include <cmath>
#include <limits>

#include "kernels/calibration.h"
#include "tests/kernels/cuda_test_util.h"

namespace lmx {
namespace {

using test::Dev;
namespace cpu = kernels::cpu;
namespace gpu = kernels::cuda;

template <typename T>
class CalibrationOps : public ::testing::Test {};
using Types = ::testing::Types<float, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(CalibrationOps, Types);

struct Shape {
  int rows, cols, ld;
};
const Shape kShapes[] = {{1, 67, 67}, {7, 33, 40}, {83, 4096, 4100}, {300, 5121, 5121}};

// x [rows, ld] of T values (fp32 host), with NaN / infinity at a few places when asked.
std::vector<float> matrix(const Shape& s, std::mt19937& rng, bool special) {
  std::vector<float> x = test::randn<float>(size_t(s.rows) * size_t(s.ld), rng, 3.0f);
  if (special) {
    x[size_t(s.rows / 2) * size_t(s.ld) + size_t(s.cols / 3)] = std::nanf("");
    x[size_t(s.rows - 1) * size_t(s.ld) + size_t(s.cols - 1)] = -INFINITY;
    x[size_t(s.cols / 2)] = INFINITY;
  }
  return x;
}

TYPED_TEST(CalibrationOps, ColumnAbsMaxMatchesCpu) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  for (const Shape& s : kShapes)
    for (const bool special : {false, true}) {
      std::mt19937 rng(s.rows * 31 + s.cols);
      std::vector<float> x = matrix(s, rng, special);
      for (float& v : x) v = float(T(v));  // the values the device holds
      std::vector<float> ref(size_t(s.cols));
      for (float& v : ref) v = std::fabs(test::randn<float>(1, rng)[0]);  // a running max
      Dev<T> dx(x.size());
      Dev<float> dout(ref.size());
      dx.upload(x);
      dout.upload(ref);
      cpu::column_abs_max(x.data(), s.rows, s.cols, s.ld, ref.data());
      gpu::column_abs_max<T>(dx.p, s.rows, s.cols, s.ld, dout.p, nullptr);
      LMX_CUDA_OK(cudaDeviceSynchronize());
      const std::vector<float> got = dout.download_f();
      int nans = 0;
      for (size_t j = 0; j < ref.size(); ++j) {
        if (std::isnan(ref[j])) {
          ++nans;
          EXPECT_TRUE(std::isnan(got[j])) << j;
        } else {
          EXPECT_EQ(got[j], ref[j]) << s.rows << "x" << s.cols << " column " << j;
        }
      }
      EXPECT_EQ(nans, special ? 1 : 0);
      if (special) {
        EXPECT_EQ(ref[size_t(s.cols / 2)], INFINITY);
        EXPECT_TRUE(std::isnan(cpu::max_or_nan(ref.data(), ref.size())));
      }
    }
}

TEST(CalibrationOps, MaxOrNan) {
  const float v[] = {0.5f, 3.0f, 2.0f};
  EXPECT_EQ(cpu::max_or_nan(v, 3), 3.0f);
  EXPECT_EQ(cpu::max_or_nan(v, 0), 0.0f);
  const float n[] = {0.5f, std::nanf(""), 9.0f};
  EXPECT_TRUE(std::isnan(cpu::max_or_nan(n, 3)));
}

TEST(CalibrationOps, SquaredErrorSumsMatchCpu) {
  LMX_REQUIRE_GPU();
  for (const size_t n : {size_t(1), size_t(1000), size_t(3) << 20}) {
    std::mt19937 rng{unsigned(n)};
    const std::vector<float> ref = test::randn<float>(n, rng, 2.0f);
    std::vector<float> y = ref;
    const std::vector<float> noise = test::randn<float>(n, rng, 0.01f);
    for (size_t i = 0; i < n; ++i) y[i] += noise[i];
    double want[2] = {0.5, 1.5};  // the sums are added to what is there
    cpu::squared_error_sums(y.data(), ref.data(), n, want);
    Dev<float> dy(n), dref(n);
    Dev<double> dsums(2);
    dy.upload(y);
    dref.upload(ref);
    const double start[2] = {0.5, 1.5};
    LMX_CUDA_OK(cudaMemcpy(dsums.p, start, sizeof(start), cudaMemcpyHostToDevice));
    gpu::squared_error_sums(dy.p, dref.p, n, dsums.p, nullptr);
    LMX_CUDA_OK(cudaDeviceSynchronize());
    double got[2];
    LMX_CUDA_OK(cudaMemcpy(got, dsums.p, sizeof(got), cudaMemcpyDeviceToHost));
    EXPECT_NEAR(got[0], want[0], 1e-9 * want[0]) << n;
    EXPECT_NEAR(got[1], want[1], 1e-9 * want[1]) << n;
  }
}

TYPED_TEST(CalibrationOps, ConvertIsTheHostsRounding) {
  LMX_REQUIRE_GPU();
  using T = TypeParam;
  std::mt19937 rng(17);
  const size_t n = 100003;
  const std::vector<float> x = test::randn<float>(n, rng, 40.0f);
  Dev<float> dx(n), dback(n);
  Dev<T> dt(n);
  dx.upload(x);
  gpu::convert<float, T>(dx.p, dt.p, n, nullptr);
  gpu::convert<T, float>(dt.p, dback.p, n, nullptr);
  LMX_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<T> as_t = dt.download();
  const std::vector<float> back = dback.download_f();
  for (size_t i = 0; i < n; ++i) {
    const float want = float(T(x[i]));  // the host's round-to-nearest-even
    ASSERT_EQ(float(as_t[i]), want) << i;
    ASSERT_EQ(back[i], want) << i;
  }
}

}  // namespace
}  // namespace lmx
