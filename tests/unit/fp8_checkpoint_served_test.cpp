// fp8 checkpoints served through the engine API (the path of lmx-server and the plugin) on the
// CPU backend: each layout LMX loads as stored (compressed-tensors per channel and per tensor,
// AutoFP8, transformers' block-scaled fp8) gives the tokens that option.quantize=fp8 gives on the
// same fp32 weights. The checkpoints are written from the real TinyStories-656K weights (hidden
// 128, intermediate 384: whole 128 x 128 blocks) with the reference quantizer, after one element
// of every row of every 128 columns of each projection is set to 1.5x the tensor's max |w|
// (equalize_row_maxima), so that a tensor's, a row's and a block's scales are the same number and
// every layout stores option.quantize=fp8's codes and scales.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/model/safetensors.h"
#include "tests/support/checkpoint_writer.h"
#include "tests/support/fp8_checkpoint_writer.h"
#include "tests/support/paths.h"
#include "tests/support/served_tokens.h"

namespace lmx {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Tensors = std::map<std::string, testing::TensorSpec>;

const fs::path kModel = testing::shared_models_dir() / "tinystories-656k";
constexpr int kLayers = 2;

// The model's tensors (F32 in its file) as specs the writers take.
Tensors read_tensors(const fs::path& file) {
  const SafetensorsFile f(file);
  Tensors out;
  for (const auto& [name, t] : f.tensors()) {
    if (t.dtype != DType::F32) throw std::logic_error(name + ": expected F32");
    testing::TensorSpec s{"F32", t.shape, std::vector<float>(size_t(t.numel()))};
    std::memcpy(s.values.data(), t.data.data(), s.values.size() * sizeof(float));
    out[name] = std::move(s);
  }
  return out;
}

// A servable model directory: the real model's tokenizer and generation files, `config` and
// `tensors`.
void write_model(const fs::path& dir, const json& config, const Tensors& tensors) {
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                        "generation_config.json"})
    fs::copy_file(kModel / f, dir / f);
  std::ofstream(dir / "config.json") << config.dump();
  testing::write_file(dir / "model.safetensors", testing::safetensors_bytes(tensors));
}

// Greedy tokens of one request served from `dir` with the environment `env`.
std::vector<int32_t> served_tokens(const fs::path& dir, std::map<std::string, std::string> env) {
  return testing::served_greedy_tokens(dir, std::move(env), "Once upon a time there was a little",
                                       16);
}

TEST(Fp8CheckpointServed, EveryLayoutGivesTheTokensOfQuantizingAtLoad) {
  json config;
  std::ifstream(kModel / "config.json") >> config;
  ASSERT_EQ(config["num_hidden_layers"], kLayers);
  Tensors fp32 = read_tensors(kModel / "model.safetensors");
  testing::equalize_row_maxima(fp32, kLayers, testing::kFp8Block);
  testing::TempDir plain;
  write_model(plain.path(), config, fp32);
  const std::vector<int32_t> want = served_tokens(plain.path(), {{"OPTION_QUANTIZE", "fp8"}});
  ASSERT_EQ(want.size(), 16u);
  // The comparison can fail: fp8 changes the tokens of these weights.
  EXPECT_NE(served_tokens(plain.path(), {}), want);

  const json autofp8 = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}};
  const std::vector<std::pair<std::string, std::pair<json, Tensors>>> layouts = {
      {"compressed-tensors, channel",
       {testing::compressed_tensors_config("channel"), testing::fp8_tensors(fp32, kLayers, false)}},
      {"compressed-tensors, tensor",
       {testing::compressed_tensors_config("tensor"), testing::fp8_tensors(fp32, kLayers, true)}},
      {"AutoFP8", {autofp8, testing::fp8_tensors(fp32, kLayers, true)}},
      {"block-scaled", {testing::block_fp8_config(), testing::fp8_block_tensors(fp32, kLayers)}},
  };
  for (const auto& [name, layout] : layouts) {
    SCOPED_TRACE(name);
    testing::TempDir dir;
    json c = config;
    c["quantization_config"] = layout.first;
    write_model(dir.path(), c, layout.second);
    EXPECT_EQ(served_tokens(dir.path(), {}), want);
    EXPECT_EQ(served_tokens(dir.path(), {{"OPTION_QUANTIZE", "fp8"}}), want);
  }
}

}  // namespace
}  // namespace lmx
