// The fp8 KV cache with per-layer scales on the CPU reference backend, on a model whose K and V
// go far beyond E4M3's 448: a tiny Llama whose k_proj / v_proj weights are multiplied by 1000.
// With calibrated scales the cache holds every value within E4M3's rounding and the logits stay
// close to the fp32 cache's; with scale 1 (what the cache did before scales) the same values
// saturate at 448 and the logits move far. Also the calibration pass itself.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <tuple>

#include <gtest/gtest.h>

#include "engine/backend/cpu_backend.h"
#include "engine/core/error.h"
#include "engine/model/model.h"
#include "kernels/kv_dtype.h"
#include "smoothquant/kv_calibration.h"
#include "tests/support/checkpoint_writer.h"
#include "tests/support/paths.h"

namespace lmx {
namespace {

using namespace lmx::testing;
using kernels::KvDtype;

constexpr float kWeightFactor = 1000.0f;

class KvFp8Scales : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = tiny_llama_config();
    config["num_hidden_layers"] = 2;
    auto tensors = tiny_llama_tensors(config);
    for (auto& [name, t] : tensors)
      if (name.find("k_proj.weight") != std::string::npos ||
          name.find("v_proj.weight") != std::string::npos)
        for (float& w : t.values) w *= kWeightFactor;
    std::ofstream(dir_.path() / "config.json") << config.dump();
    write_file(dir_.path() / "model.safetensors", safetensors_bytes(tensors));
    model_ = load_model(dir_.path());
    for (int i = 0; i < 40; ++i) prompt_.push_back(3 + (i * 7) % 29);  // ids in [3, 32)
  }

  // The prompt's prefill on a fresh backend: its last-token logits, and the backend (its cache).
  std::unique_ptr<Backend> prefill(KvDtype dtype, std::vector<float>& logits) const {
    auto b = make_cpu_backend(model_, {16, 4, dtype});
    const std::vector<int32_t> table = {2, 0, 3};
    const BatchChunk chunk{prompt_, 0, table, true};
    b->forward(std::span(&chunk, 1), logits);
    return b;
  }

  static float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    float m = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
  }

  TempDir dir_;
  LoadedModel model_;
  std::vector<int32_t> prompt_;
};

TEST_F(KvFp8Scales, CalibrationSeesKAndVBeyond448AndPicksPowerOfTwoScales) {
  const auto ranges = smoothquant::measure_kv_ranges(model_, {}, {prompt_});
  ASSERT_EQ(ranges.size(), 2u);
  for (const auto& r : ranges) {
    EXPECT_GT(r.k, 448.0f);  // the model really needs scales
    EXPECT_GT(r.v, 448.0f);
    for (float m : {r.k, r.v}) {
      const float s = smoothquant::kv_scale_for(m);
      EXPECT_EQ(std::exp2(std::round(std::log2(s))), s);           // a power of two
      EXPECT_LE(m * smoothquant::kKvScaleMargin, 448.0f * s);      // the margin fits
      EXPECT_GT(m * smoothquant::kKvScaleMargin, 448.0f * s / 2);  // and no coarser than needed
    }
  }
}

TEST(KvScaleFor, OneWhileTheMaxFitsThenTheNextPowerOfTwo) {
  using smoothquant::kv_scale_for;
  EXPECT_EQ(kv_scale_for(0.0f), 1.0f);
  EXPECT_EQ(kv_scale_for(3.0f), 1.0f);
  EXPECT_EQ(kv_scale_for(448.0f / 1.25f), 1.0f);
  EXPECT_EQ(kv_scale_for(448.0f), 2.0f);
  EXPECT_EQ(kv_scale_for(2.0f * 448.0f / 1.25f), 2.0f);  // exactly 2: not rounded up to 4
  EXPECT_EQ(kv_scale_for(1000.0f), 4.0f);                // 1250 / 448 = 2.79
  EXPECT_EQ(kv_scale_for(1e6f), 4096.0f);                // 2790
  EXPECT_THROW(kv_scale_for(std::nanf("")), Error);
  EXPECT_THROW(kv_scale_for(INFINITY), Error);
}

TEST_F(KvFp8Scales, ScaledCacheHoldsLargeValuesWhereScaleOneSaturates) {
  std::vector<kernels::KvScale> scales;
  for (const auto& r : smoothquant::measure_kv_ranges(model_, {}, {prompt_}))
    scales.push_back({smoothquant::kv_scale_for(r.k), smoothquant::kv_scale_for(r.v)});
  std::vector<float> ref_logits, unscaled_logits, scaled_logits;
  const auto ref = prefill(KvDtype::model, ref_logits);
  const auto unscaled = prefill(KvDtype::fp8_e4m3, unscaled_logits);  // no scales: 1
  model_.kv_scales = scales;
  const auto scaled = prefill(KvDtype::fp8_e4m3, scaled_logits);

  // The caches, value by value, over the prompt's slots (blocks 2, 0, 3). Every layer's fp8
  // values are codes times the layer's scale; layer 0's K/V come from the embeddings alone, so
  // they are exactly the fp32 cache's rounded (later layers see the earlier layers' rounding).
  const int kv = model_.desc.kv_size();
  const std::vector<int32_t> table = {2, 0, 3};
  for (int l = 0; l < model_.desc.num_layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const CpuKvView r = cpu_kv_cache(*ref, l), u = cpu_kv_cache(*unscaled, l),
                    s = cpu_kv_cache(*scaled, l);
    float scaled_rel = 0.0f, unscaled_abs = 0.0f;
    for (size_t p = 0; p < prompt_.size(); ++p) {
      const size_t slot = (size_t(table[p / 16]) * 16 + p % 16) * size_t(kv);
      for (int i = 0; i < kv; ++i) {
        const size_t at = slot + size_t(i);
        for (auto [cache, ref_cache, scale] : {std::tuple{s.k, r.k, scales[size_t(l)].k},
                                               std::tuple{s.v, r.v, scales[size_t(l)].v}}) {
          ASSERT_EQ(cache[at], kernels::cpu::round_to_e4m3(cache[at], scale));
          if (l > 0) continue;
          ASSERT_EQ(cache[at], kernels::cpu::round_to_e4m3(ref_cache[at], scale));
          // Round to nearest: half a step, 1/16 of the value (or 2^-10 * scale near zero).
          scaled_rel = std::max(scaled_rel, std::fabs(cache[at] - ref_cache[at]) /
                                                std::max(std::fabs(ref_cache[at]), scale / 64.0f));
        }
        ASSERT_LE(std::max(std::fabs(u.k[at]), std::fabs(u.v[at])), 448.0f);  // scale 1 saturates
        if (l == 0)
          unscaled_abs =
              std::max({unscaled_abs, std::fabs(u.k[at] - r.k[at]), std::fabs(u.v[at] - r.v[at])});
      }
    }
    if (l == 0) {
      EXPECT_LE(scaled_rel, 1.0f / 16.0f);
      EXPECT_GT(unscaled_abs, 100.0f);  // values of 550 and more were cut to 448
    }
  }

  // The logits: the scaled fp8 cache stays near the fp32 cache, the saturated one does not
  // (measured: 0.059 and 3.0 of the largest |logit|; the bounds leave room for BLAS summation
  // order, while losing the scales, or applying them twice, moves the logits by far more).
  ASSERT_EQ(scaled_logits.size(), ref_logits.size());
  float ref_max = 0.0f;
  for (float x : ref_logits) ref_max = std::max(ref_max, std::fabs(x));
  const float scaled_err = max_abs_diff(scaled_logits, ref_logits) / ref_max;
  const float unscaled_err = max_abs_diff(unscaled_logits, ref_logits) / ref_max;
  std::printf("[ fp8 kv scales ] logits relative to max |logit| %.3g: scaled %.3g, scale 1 %.3g\n",
              ref_max, scaled_err, unscaled_err);
  EXPECT_LT(scaled_err, 0.1f);
  EXPECT_GT(unscaled_err, 3.0f * scaled_err);
}

// Random benchmark weights have no checkpoint scales and cannot run on the CPU reference: the
// error says which setting to use instead.
TEST(KvFp8Calibration, RandomWeightsAskForAFixedScale) {
  LoadedModel model;
  model.dir = "/models/bench";
  model.random_seed = 7;
  try {
    smoothquant::calibrate_kv_scales(model, {});
    FAIL() << "expected an lmx::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("random benchmark weights"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("option.kv_cache_scale"), std::string::npos) << e.what();
  }
}

// A real model whose K/V fit E4M3: calibration over the built-in text keeps every scale at 1, so
// the fp8 cache behaves exactly as it did before scales existed.
TEST(KvFp8Calibration, StoriesModelKeepsScaleOne) {
  const LoadedModel model = load_model(shared_models_dir() / "stories260k");
  const auto scales = smoothquant::calibrate_kv_scales(model, {});
  ASSERT_EQ(scales.size(), size_t(model.desc.num_layers));
  for (const kernels::KvScale& s : scales) {
    EXPECT_EQ(s.k, 1.0f);
    EXPECT_EQ(s.v, 1.0f);
  }
}

}  // namespace
}  // namespace lmx
