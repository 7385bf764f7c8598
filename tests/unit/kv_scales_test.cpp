// The fp8 KV cache's scales from a checkpoint (engine/model/kv_scales.h): every spelling vLLM,
// compressed-tensors, ModelOpt and Quark checkpoints use, and a clear error for each malformed
// scale. Also the engine's choice (smoothquant/kv_calibration.h, choose_kv_scales) when the
// checkpoint has scales or the configuration fixes one.
#include <cmath>
#include <fstream>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/model/kv_scales.h"
#include "engine/model/model.h"
#include "smoothquant/kv_calibration.h"
#include "tests/support/checkpoint_writer.h"
#include "tests/support/expect_error.h"

namespace lmx {
namespace {

using namespace lmx::testing;

TensorSpec scalar(float v, std::vector<int64_t> shape = {}) {
  TensorSpec t;
  t.shape = std::move(shape);
  t.values.assign(1, v);
  return t;
}

// A tiny two-layer Llama with extra tensors added to its checkpoint.
class KvScalesTest : public ::testing::Test {
 protected:
  LoadedModel load_with(const std::map<std::string, TensorSpec>& extra) {
    auto config = tiny_llama_config();
    config["num_hidden_layers"] = 2;
    auto tensors = tiny_llama_tensors(config);
    for (const auto& [name, t] : extra) tensors[name] = t;
    std::ofstream(dir_.path() / "config.json") << config.dump();
    write_file(dir_.path() / "model.safetensors", safetensors_bytes(tensors));
    return load_model(dir_.path());
  }
  static std::optional<std::vector<kernels::KvScale>> read(const LoadedModel& m) {
    return read_checkpoint_kv_scales(*m.checkpoint, m.desc, m.architecture->tensor_names(m.desc));
  }
  static std::string layer(int l, const std::string& rest) {
    return "model.layers." + std::to_string(l) + ".self_attn." + rest;
  }

  TempDir dir_;
};

TEST_F(KvScalesTest, NoScalesInTheCheckpointIsNullopt) {
  EXPECT_FALSE(read(load_with({})).has_value());
}

TEST_F(KvScalesTest, ReadsEverySpellingPerLayer) {
  struct Case {
    const char* k;
    const char* v;
  };
  for (const Case c : {Case{"k_scale", "v_scale"}, Case{"k_proj.k_scale", "v_proj.v_scale"},
                       Case{"k_proj.output_scale", "v_proj.output_scale"}}) {
    SCOPED_TRACE(c.k);
    const auto s = read(load_with({{layer(0, c.k), scalar(2.0f)},
                                   {layer(0, c.v), scalar(0.25f, {1})},
                                   {layer(1, c.k), scalar(3.5f, {1, 1})},
                                   {layer(1, c.v), scalar(8.0f)}}));
    ASSERT_TRUE(s.has_value());
    ASSERT_EQ(s->size(), 2u);
    EXPECT_EQ((*s)[0].k, 2.0f);
    EXPECT_EQ((*s)[0].v, 0.25f);
    EXPECT_EQ((*s)[1].k, 3.5f);
    EXPECT_EQ((*s)[1].v, 8.0f);
  }
}

TEST_F(KvScalesTest, OlderSingleKvScaleServesKAndV) {
  const auto s =
      read(load_with({{layer(0, "kv_scale"), scalar(1.5f)}, {layer(1, "kv_scale"), scalar(6.0f)}}));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ((*s)[0].k, 1.5f);
  EXPECT_EQ((*s)[0].v, 1.5f);
  EXPECT_EQ((*s)[1].k, 6.0f);
  EXPECT_EQ((*s)[1].v, 6.0f);
}

TEST_F(KvScalesTest, MalformedScalesAreErrorsNamingTheTensor) {
  const std::string k0 = layer(0, "k_scale");
  auto with_k0 = [&](TensorSpec k) {
    return std::map<std::string, TensorSpec>{{k0, std::move(k)},
                                             {layer(0, "v_scale"), scalar(1.0f)},
                                             {layer(1, "k_scale"), scalar(1.0f)},
                                             {layer(1, "v_scale"), scalar(1.0f)}};
  };
  TensorSpec per_head;
  per_head.shape = {2};
  per_head.values = {1.0f, 2.0f};
  expect_error([&] { read(load_with(with_k0(per_head))); }, {k0, "shape [2]", "one number"});
  expect_error([&] { read(load_with(with_k0(scalar(0.0f)))); }, {k0, "positive finite"});
  expect_error([&] { read(load_with(with_k0(scalar(-2.0f)))); }, {k0, "-2", "positive finite"});
  expect_error([&] { read(load_with(with_k0(scalar(std::nanf(""))))); }, {k0, "positive finite"});
  expect_error([&] { read(load_with(with_k0(scalar(std::numeric_limits<float>::infinity())))); },
               {k0, "positive finite"});
  TensorSpec int_scale;
  int_scale.dtype = "I8";
  int_scale.shape = {};
  expect_error([&] { read(load_with(with_k0(int_scale))); }, {k0, "dtype", "F32, F16 or BF16"});
}

TEST_F(KvScalesTest, AKScaleWithoutItsVScaleIsAnError) {
  expect_error(
      [&] {
        read(load_with({{layer(0, "k_scale"), scalar(1.0f)},
                        {layer(1, "k_scale"), scalar(1.0f)},
                        {layer(1, "v_scale"), scalar(1.0f)}}));
      },
      {layer(0, "k_scale"), layer(0, "v_scale"), "pairs"});
}

TEST_F(KvScalesTest, ScalesForSomeLayersOnlyAreAnError) {
  expect_error(
      [&] {
        read(load_with({{layer(0, "k_scale"), scalar(1.0f)}, {layer(0, "v_scale"), scalar(1.0f)}}));
      },
      {"1 of 2 layers", "layer 1 has none", layer(1, "k_scale")});
}

// The engine's choice: auto takes the checkpoint's; a fixed value wins over them; the model
// dtype cache leaves the model without scales.
TEST_F(KvScalesTest, ChooseKvScalesFollowsTheSetting) {
  properties::ServingConfig config;
  LoadedModel m = load_with({{layer(0, "k_scale"), scalar(2.0f)},
                             {layer(0, "v_scale"), scalar(4.0f)},
                             {layer(1, "k_scale"), scalar(8.0f)},
                             {layer(1, "v_scale"), scalar(16.0f)}});
  smoothquant::choose_kv_scales(m, config);  // kv_cache_dtype auto: no scales
  EXPECT_TRUE(m.kv_scales.empty());
  config.kv_cache_dtype = properties::KvCacheDtype::Fp8E4m3;
  smoothquant::choose_kv_scales(m, config);
  ASSERT_EQ(m.kv_scales.size(), 2u);
  EXPECT_EQ(m.kv_scales[1].k, 8.0f);
  EXPECT_EQ(m.kv_scales[1].v, 16.0f);
  config.kv_cache_scale = {properties::KvCacheScale::Kind::Fixed, 1.0};
  smoothquant::choose_kv_scales(m, config);
  ASSERT_EQ(m.kv_scales.size(), 2u);
  for (const kernels::KvScale& s : m.kv_scales) {
    EXPECT_EQ(s.k, 1.0f);
    EXPECT_EQ(s.v, 1.0f);
  }
}

TEST(KvScaleLists, LayerScalesAreOnesUnlessTheCacheIsFp8) {
  LoadedModel m;
  m.desc.num_layers = 3;
  EXPECT_EQ(layer_kv_scales(m, kernels::KvDtype::fp8_e4m3).size(), 3u);
  m.kv_scales = {{2, 4}, {1, 1}, {8, 0.5f}};
  EXPECT_EQ(layer_kv_scales(m, kernels::KvDtype::fp8_e4m3)[2].v, 0.5f);
  EXPECT_EQ(layer_kv_scales(m, kernels::KvDtype::model)[0].k, 1.0f);
  EXPECT_EQ(describe_kv_scales(m.kv_scales), "k 1..8, v 0.5..4 over 3 layers");
  m.kv_scales.pop_back();
  expect_error([&] { layer_kv_scales(m, kernels::KvDtype::fp8_e4m3); },
               {"2 KV cache scales", "3 layers"});
}

}  // namespace
}  // namespace lmx
