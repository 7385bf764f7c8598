// smoothquant's and the fp8 cache's calibration on the GPU (CudaBackendOptions::observer,
// engine/backend/activation_observer.h) against the CPU reference's, on every parity fixture
// (every family's layer program), over the fixture's prompts and greedy paths:
//  - the statistics: each input's column maxima, its kept rows and token counts; in fp32 equal up
//    to fp32 reordering (1e-4 of the input's largest value), in fp16 / bf16 within the dtype's
//    rounding carried through the layers: 5e-2 / 0.2 of that value, for single values (a kept
//    row's element), where the logits' bounds in cuda_parity_test.cpp are 2e-2 / 0.16 relative
//    L2 over a row. H100, 2026-11-27: worst 4.5e-6 (fp32), 0.0213 (fp16) and 0.0942 (bf16), the
//    last two gpt_neo_mixed_local's (no attention scale: larger scores);
//  - the K/V ranges (the fp8 cache's scales), to the same bounds;
//  - the alpha search (engine/backend/smoothing_scorer.h): in fp32 the GPU's W8A8 error sums on
//    the CPU's rows equal the CPU's up to the epilogue's and the reference GEMM's rounding (the
//    int8 codes and int32 sums are the same); in fp16 / bf16 a whole plan is searched and finite.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/model.h"
#include "smoothquant/calibration.h"
#include "smoothquant/kv_calibration.h"
#include "smoothquant/plan.h"
#include "smoothquant/smoothing.h"
#include "smoothquant/smoothquant.h"
#include "tests/support/parity_fixtures.h"
#include "tests/support/require_gpu.h"

namespace lmx {
namespace {

using json = nlohmann::json;
namespace sq = smoothquant;

#define REQUIRE_GPU()                          \
  LMX_GPU_SKIP_UNLESS(cuda_device_available(), \
                      "no CUDA GPU: run scripts/gpu_tests.sh on the device")

// Each case's prompt and greedy path: the synthetic fixtures have no tokenizer.
std::vector<std::vector<int32_t>> fixture_samples(const json& expected) {
  std::vector<std::vector<int32_t>> samples;
  for (const json& c : expected["cases"]) {
    auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto path = c["greedy_ids"].get<std::vector<int32_t>>();
    ids.insert(ids.end(), path.begin(), path.end());
    samples.push_back(std::move(ids));
  }
  return samples;
}

struct DtypeCase {
  CudaDtype dtype;
  double tol;  // of the input's largest |value|
  const char* name;
};
const DtypeCase kDtypes[] = {
    {CudaDtype::F32, 1e-4, "fp32"}, {CudaDtype::F16, 5e-2, "fp16"}, {CudaDtype::BF16, 0.2, "bf16"}};

// The largest |a[i] - b[i]| over max |b| (0 when b is all zeros and a equals it).
double scaled_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return scale > 0.0 ? diff / scale : diff;
}

class CudaCalibration : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaCalibration, StatisticsAndSearchMatchTheCpu) {
  REQUIRE_GPU();
  const auto f = testing::open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  const auto samples = fixture_samples(f.expected);
  const int longest = sq::longest_sample(samples);
  sq::Calibrator cpu(model, {}, sq::kSearchRows, longest);
  cpu.run(samples);
  for (const DtypeCase& d : kDtypes) {
    sq::Calibrator gpu(model, {true, d.dtype, 0}, sq::kSearchRows, longest);
    gpu.run(samples);
    ASSERT_EQ(gpu.stats().size(), cpu.stats().size());
    double worst = 0.0;
    for (size_t l = 0; l < cpu.stats().size(); ++l)
      for (size_t s = 0; s < size_t(kLinearSlots); ++s) {
        const sq::InputStats& want = cpu.stats()[l][s];
        const sq::InputStats& got = gpu.stats()[l][s];
        ASSERT_EQ(got.in, want.in) << "layer " << l << " slot " << s;
        ASSERT_GT(want.in, 0) << "layer " << l << " slot " << s << " never observed";
        EXPECT_EQ(got.tokens, want.tokens) << "layer " << l << " slot " << s;
        ASSERT_EQ(got.kept(), want.kept()) << "layer " << l << " slot " << s;
        const double max_err = scaled_difference(got.abs_max, want.abs_max);
        const double rows_err = scaled_difference(got.rows, want.rows);
        worst = std::max({worst, max_err, rows_err});
        EXPECT_LE(max_err, d.tol) << d.name << " layer " << l << " slot " << s << " maxima";
        EXPECT_LE(rows_err, d.tol) << d.name << " layer " << l << " slot " << s << " rows";
      }
    std::printf(
        "[ calibration ] %s %s: worst statistic difference %.3g of the input's max "
        "(bound %.3g)\n",
        GetParam().c_str(), d.name, worst, d.tol);
    if (d.dtype == CudaDtype::F32) {
      // The same rows and factors scored on both devices.
      for (int l = 0; l < model.desc.num_layers; ++l)
        for (const LinearSlot slot : {LinearSlot::Qkv, LinearSlot::Up}) {
          const sq::InputStats& in = cpu.stats()[size_t(l)][size_t(slot)];
          std::vector<float> weight_max = cpu.scorer().weight_column_max(l, slot);
          EXPECT_EQ(gpu.scorer().weight_column_max(l, slot), weight_max) << "layer " << l;
          const std::vector<float> s = sq::smoothing_factors(in.abs_max, weight_max, 0.5);
          ErrorSums want, got;
          for (auto [scorer, out] :
               {std::pair{&cpu.scorer(), &want}, std::pair{&gpu.scorer(), &got}}) {
            scorer->set_rows(in.rows, int(in.kept()), int(in.in));
            *out = scorer->w8a8_error(l, slot, s);
          }
          EXPECT_NEAR(got.reference, want.reference, 1e-5 * want.reference) << "layer " << l;
          EXPECT_NEAR(got.error, want.error, 1e-3 * want.error) << "layer " << l;
          EXPECT_GT(want.error, 0.0);
        }
    } else {
      const sq::Plan plan = sq::make_plan(model.desc, gpu.stats(), std::nullopt, gpu.scorer());
      for (const sq::LayerPlan& l : plan.layers) EXPECT_TRUE(std::isfinite(l.error)) << d.name;
    }
    const auto want_kv = sq::measure_kv_ranges(model, {}, samples);
    const auto got_kv = sq::measure_kv_ranges(model, {true, d.dtype, 0}, samples);
    ASSERT_EQ(got_kv.size(), want_kv.size());
    for (size_t l = 0; l < want_kv.size(); ++l) {
      EXPECT_NEAR(got_kv[l].k, want_kv[l].k, d.tol * want_kv[l].k) << d.name << " layer " << l;
      EXPECT_NEAR(got_kv[l].v, want_kv[l].v, d.tol * want_kv[l].v) << d.name << " layer " << l;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaCalibration,
                         ::testing::ValuesIn(testing::parity_fixture_names()),
                         testing::ParityNamePrinter());

// A calibration backend refuses what would make its observer see something else than the model's
// own computation (fused decode projections, graphs, shards), and its alpha search refuses
// quantized weights; the fp8 cache's calibration runs a quantized model as it will serve.
TEST(CudaCalibrationOptions, RefusesFusedOrShardedBackendsAndSearchesUnquantizedWeights) {
  REQUIRE_GPU();
  const auto f = testing::open_parity_fixture("llama_mha_tied");
  struct Silent final : ActivationObserver {
    void observe(int, LinearSlot, const InputSummary&) override {}
  } observer;
  CudaBackendOptions o;
  o.observer = &observer;
  o.fuse_decode_projections = false;
  o.kv_blocks = 4;
  o.max_sequences = 1;
  const LoadedModel model = load_model(f.model_dir);
  EXPECT_NE(make_cuda_backend(model, o), nullptr);
  CudaBackendOptions fused = o;
  fused.fuse_decode_projections = true;
  EXPECT_THROW(make_cuda_backend(model, fused), Error);
  CudaBackendOptions graphs = o;
  graphs.cuda_graphs = true;
  EXPECT_THROW(make_cuda_backend(model, graphs), Error);
  CudaBackendOptions sharded = o;
  sharded.tensor_parallel_degree = 2;
  EXPECT_THROW(make_cuda_backend(model, sharded), Error);
  const LoadedModel int8 = load_model(f.model_dir, LinearQuant{QuantKind::W8A16PerChannel});
  const auto backend = make_cuda_backend(int8, o);
  try {
    backend->smoothing_scorer()->weight_column_max(0, LinearSlot::Qkv);
    ADD_FAILURE() << "the alpha search scored int8 weights";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unquantized"), std::string::npos) << e.what();
  }
  // The fp8 cache's K/V ranges of the int8 model, on the GPU and on the CPU reference.
  const auto samples = fixture_samples(f.expected);
  const auto want = sq::measure_kv_ranges(int8, {}, samples);
  const auto got = sq::measure_kv_ranges(int8, {true, CudaDtype::F32, 0}, samples);
  ASSERT_EQ(got.size(), want.size());
  for (size_t l = 0; l < want.size(); ++l) {
    EXPECT_NEAR(got[l].k, want[l].k, 1e-4 * want[l].k) << "layer " << l;
    EXPECT_NEAR(got[l].v, want[l].v, 1e-4 * want[l].v) << "layer " << l;
  }
}

}  // namespace
}  // namespace lmx
