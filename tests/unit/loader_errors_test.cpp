// Every loader failure is a clear lmx::Error naming what was wrong; malformed files never crash.
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/backend/cpu_backend.h"
#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/model/model.h"
#include "engine/model/safetensors.h"
#include "engine/model/weight_map.h"
#include "tests/support/checkpoint_writer.h"
#include "tests/support/expect_error.h"

namespace lmx {
namespace {

using ::testing::HasSubstr;
using namespace lmx::testing;
namespace fs = std::filesystem;

class LoaderTest : public ::testing::Test {
 protected:
  void write_config(const nlohmann::json& config) {
    std::ofstream(dir_.path() / "config.json") << config.dump();
  }
  void write_model(const nlohmann::json& config, const std::map<std::string, TensorSpec>& tensors) {
    write_config(config);
    write_file(dir_.path() / "model.safetensors", safetensors_bytes(tensors));
  }
  LoadedModel load() { return load_model(dir_.path()); }

  TempDir dir_;
};

TEST_F(LoaderTest, ValidTinyModelLoads) {
  write_model(tiny_llama_config(), tiny_llama_tensors(tiny_llama_config()));
  const LoadedModel m = load();
  EXPECT_EQ(m.desc.num_kv_heads, 2);
  EXPECT_EQ(m.weights.layers[0].qkv.weight.shape, (std::vector<int64_t>{16 + 2 * 8, 16}));
}

TEST_F(LoaderTest, MissingDirectory) {
  expect_error([&] { load_model(dir_.path() / "nope"); }, {"config.json"});
}

TEST_F(LoaderTest, UnknownArchitectureListsSupported) {
  auto config = tiny_llama_config();
  config["architectures"] = {"FalconForCausalLM"};
  write_model(config, tiny_llama_tensors(tiny_llama_config()));
  expect_error([&] { load(); }, {"FalconForCausalLM", "LlamaForCausalLM", "GPT2LMHeadModel",
                                 "MistralForCausalLM", "Qwen2ForCausalLM"});
}

TEST_F(LoaderTest, ConfigNotJson) {
  std::ofstream(dir_.path() / "config.json") << "{ not json";
  expect_error([&] { load(); }, {"config.json", "not valid JSON"});
}

TEST_F(LoaderTest, ConfigMistypedField) {
  auto config = tiny_llama_config();
  config["hidden_size"] = "sixteen";
  write_model(config, tiny_llama_tensors(tiny_llama_config()));
  expect_error([&] { load(); }, {"hidden_size", "integer"});
}

TEST_F(LoaderTest, UnsupportedRopeType) {
  auto config = tiny_llama_config();
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  write_model(config, tiny_llama_tensors(tiny_llama_config()));
  expect_error([&] { load(); }, {"yarn", "llama3"});
}

// Rope scaling numbers out of range are errors naming the key, never a conversion of a huge or
// negative value (found by the model_config fuzz target: 2.2e62 as an int).
TEST_F(LoaderTest, RopeScalingNumbersOutOfRange) {
  const std::vector<std::pair<const char*, double>> bad = {
      {"original_max_position_embeddings", 2.2e62}, {"original_max_position_embeddings", 0.0},
      {"original_max_position_embeddings", 8192.5}, {"factor", -8.0}, {"factor", 1e300},
      {"low_freq_factor", 0.0}, {"high_freq_factor", -4.0}};
  for (const auto& [key, value] : bad) {
    auto config = tiny_llama_config();
    config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 8192}};
    config["rope_scaling"][key] = value;
    write_model(config, tiny_llama_tensors(tiny_llama_config()));
    SCOPED_TRACE(std::string(key) + " = " + std::to_string(value));
    expect_error([&] { load(); }, {"rope_scaling", key});
  }
  auto linear = tiny_llama_config();
  linear["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0.0}};
  write_model(linear, tiny_llama_tensors(tiny_llama_config()));
  expect_error([&] { load(); }, {"'factor' = 0 must be a positive finite number"});
}

TEST_F(LoaderTest, NoWeightsFile) {
  write_config(tiny_llama_config());
  expect_error([&] { load(); }, {"model.safetensors"});
}

TEST_F(LoaderTest, MissingTensorIsNamed) {
  auto tensors = tiny_llama_tensors(tiny_llama_config());
  tensors.erase("model.layers.0.mlp.up_proj.weight");
  write_model(tiny_llama_config(), tensors);
  expect_error([&] { load(); }, {"missing tensor 'model.layers.0.mlp.up_proj.weight'"});
}

TEST_F(LoaderTest, WrongShapeNamesTensorExpectedAndFound) {
  auto tensors = tiny_llama_tensors(tiny_llama_config());
  tensors["model.layers.0.self_attn.k_proj.weight"].shape = {16, 16};
  tensors["model.layers.0.self_attn.k_proj.weight"].values.resize(256);
  write_model(tiny_llama_config(), tensors);
  expect_error([&] { load(); },
               {"model.layers.0.self_attn.k_proj.weight", "[16, 16]", "expected [8, 16]"});
}

TEST_F(LoaderTest, WrongDtypeIsNamed) {
  auto tensors = tiny_llama_tensors(tiny_llama_config());
  tensors["model.norm.weight"] = TensorSpec{"I8", {16}, {}};
  write_model(tiny_llama_config(), tensors);
  expect_error([&] { load(); }, {"model.norm.weight", "I8", "F32, F16 or BF16"});
}

TEST_F(LoaderTest, MissingLmHeadWhenUntied) {
  auto tensors = tiny_llama_tensors(tiny_llama_config());
  tensors.erase("lm_head.weight");
  write_model(tiny_llama_config(), tensors);
  expect_error([&] { load(); }, {"lm_head.weight"});
}

TEST_F(LoaderTest, TiedModelWithOnlyLmHeadLoads) {
  auto config = tiny_llama_config();
  config["tie_word_embeddings"] = true;
  auto tensors = tiny_llama_tensors(config);
  tensors.erase("model.embed_tokens.weight");
  write_model(config, tensors);
  const LoadedModel m = load();
  ASSERT_EQ(m.weights.embed.parts.size(), 1u);
  EXPECT_EQ(m.weights.embed.parts[0], m.checkpoint->find("lm_head.weight"));
  EXPECT_TRUE(m.weights.lm_head_tied);
}

// ---- malformed safetensors files ----

class MalformedFileTest : public LoaderTest {
 protected:
  void SetUp() override { write_config(tiny_llama_config()); }
  void write_weights(const std::string& bytes) {
    write_file(dir_.path() / "model.safetensors", bytes);
  }
  std::string valid() { return safetensors_bytes(tiny_llama_tensors(tiny_llama_config())); }
  // A file of this header and `data_bytes` zero bytes of data.
  void write_raw(const std::string& header, size_t data_bytes) {
    const uint64_t len = header.size();
    std::string out(8, '\0');
    std::memcpy(out.data(), &len, 8);
    write_weights(out + header + std::string(data_bytes, '\0'));
  }
};

// A tensor of no elements (shape [0]) is valid: it maps to no bytes and converts to nothing, in
// every dtype, with the null pointers of empty buffers (the safetensors fuzzer's finding of
// 2026-11-28: memcpy from / to null, undefined even for 0 bytes).
TEST_F(MalformedFileTest, EmptyTensorConvertsToNothing) {
  write_raw(R"({"__m": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})", 0);
  const SafetensorsFile f(dir_.path() / "model.safetensors");
  ASSERT_EQ(f.tensors().size(), 1u);
  for (const auto& [name, view] : f.tensors()) {
    EXPECT_EQ(view.numel(), 0);
    std::vector<float> out;
    convert_to_f32(view.dtype, view.data.data(), out.size(), out.data());
  }
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::F8_E4M3})
    convert_to_f32(d, nullptr, 0, nullptr);
}

TEST_F(MalformedFileTest, EmptyFile) {
  write_weights("");
  expect_error([&] { load(); }, {"model.safetensors", "truncated"});
}

TEST_F(MalformedFileTest, HeaderLengthBeyondFile) {
  std::string bytes = valid();
  const uint64_t huge = bytes.size();  // header claims more bytes than follow it
  std::memcpy(bytes.data(), &huge, 8);
  write_weights(bytes);
  expect_error([&] { load(); }, {"header length", "exceeds"});
}

TEST_F(MalformedFileTest, HeaderNotJson) {
  const std::string header = "{\"a\": [1, 2";
  const uint64_t len = header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &len, 8);
  write_weights(bytes + header);
  expect_error([&] { load(); }, {"header is not a JSON object"});
}

TEST_F(MalformedFileTest, TruncatedData) {
  std::string bytes = valid();
  bytes.resize(bytes.size() - 100);
  write_weights(bytes);
  expect_error([&] { load(); }, {"out of range", "truncated"});
}

TEST_F(MalformedFileTest, OffsetsDisagreeWithShape) {
  std::map<std::string, TensorSpec> t = {{"x", TensorSpec{"F32", {4}, {1, 2, 3, 4}}}};
  std::string bytes = safetensors_bytes(t);
  // Rewrite the header so the shape says 5 elements while the offsets span 4.
  const std::string header = R"({"x":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})";
  const uint64_t len = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  write_weights(out + header + std::string(16, '\0'));
  expect_error([&] { load(); }, {"'x'", "16 bytes", "needs 20"});
}

TEST_F(MalformedFileTest, UnknownDtype) {
  const std::string header = R"({"x":{"dtype":"F8_E9","shape":[1],"data_offsets":[0,1]}})";
  const uint64_t len = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  write_weights(out + header + std::string(1, '\0'));
  expect_error([&] { load(); }, {"unknown dtype 'F8_E9'"});
}

TEST_F(MalformedFileTest, Fp8E5m2CheckpointIsNamed) {
  const std::string header = R"({"x":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[0,1]}})";
  const uint64_t len = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  write_weights(out + header + std::string(1, '\0'));
  expect_error([&] { load(); }, {"tensor 'x': dtype F8_E5M2 (fp8 weights with 2 mantissa bits) is "
                                 "not supported", "fp8 checkpoints in F8_E4M3"});
}

TEST_F(MalformedFileTest, NegativeOrBadOffsets) {
  const std::string header = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})";
  const uint64_t len = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  write_weights(out + header + std::string(4, '\0'));
  expect_error([&] { load(); }, {"data_offsets"});
}

TEST_F(MalformedFileTest, HeaderEntryMissingShape) {
  const std::string header = R"({"x":{"dtype":"F32","data_offsets":[0,4]}})";
  const uint64_t len = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  write_weights(out + header + std::string(4, '\0'));
  expect_error([&] { load(); }, {"'x'", "shape"});
}

// The data section is indexed entirely, tensor after tensor, as the reference library requires.
TEST_F(MalformedFileTest, OverlappingTensorsAreNamed) {
  write_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
  expect_error([&] { load(); }, {"model.safetensors", "tensor 'b'", "overlaps tensor 'a'"});
}

TEST_F(MalformedFileTest, BytesOfNoTensorAreRefused) {
  write_raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  expect_error([&] { load(); }, {"bytes [0, 4) belong to no tensor"});
  write_raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8);
  expect_error([&] { load(); }, {"bytes [4, 8) belong to no tensor"});
}

// 2^62 F32 elements are 2^64 bytes: the byte count must not wrap to 0 and pass as empty.
TEST_F(MalformedFileTest, ByteCountOverflowIsRefused) {
  write_raw(R"({"x":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0);
  expect_error([&] { load(); }, {"'x'", "overflows a 64-bit byte count"});
}

// Non-finite weights would load as healthy and answer garbage: loading names the tensor.
TEST_F(LoaderTest, NonFiniteWeightIsNamed) {
  const auto config = tiny_llama_config();
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    auto tensors = tiny_llama_tensors(config);
    TensorSpec& w = tensors.at("model.layers.0.mlp.down_proj.weight");
    w.values.assign(size_t(w.shape[0] * w.shape[1]), 0.5f);
    w.values[7] = bad;
    write_model(config, tensors);
    expect_error([&] { make_cpu_backend(load(), {16, 4}); },
                 {"model.safetensors", "tensor 'model.layers.0.mlp.down_proj.weight'",
                  "non-finite weight"});
  }
}

// The same when the weight is copied as stored (the CUDA backend's load of a checkpoint in its
// own dtype): the copy checks every value too.
TEST_F(LoaderTest, NonFiniteWeightCopiedAsStoredIsNamed) {
  const auto config = tiny_llama_config();
  auto tensors = tiny_llama_tensors(config);
  TensorSpec& w = tensors.at("model.layers.0.mlp.down_proj.weight");
  w.values.assign(size_t(w.shape[0] * w.shape[1]), 0.5f);
  w.values[size_t(w.shape[1]) + 3] = std::numeric_limits<float>::infinity();  // row 1
  write_model(config, tensors);
  const LoadedModel m = load();
  const WeightRef& ref = m.weights.layers[0].down.weight;
  std::vector<std::byte> bytes(size_t(ref.numel()) * sizeof(float));
  expect_error([&] { copy_rows_as_stored(ref, DType::F32, 0, ref.shape[0], bytes.data()); },
               {"tensor 'model.layers.0.mlp.down_proj.weight'", "non-finite weight (inf) in row 1"});
}

// Config values that make the math undefined are refused, naming the key and the value.
TEST_F(LoaderTest, UndefinedConfigValuesAreNamed) {
  const auto tensors = tiny_llama_tensors(tiny_llama_config());
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"num_hidden_layers", -1}}, "num_hidden_layers = -1 must be positive"},
      {{{"rms_norm_eps", -1}}, "rms_norm_eps = -1 must be a positive finite number"},
      {{{"rms_norm_eps", 0}}, "rms_norm_eps = 0 must be a positive finite number"},
      {{{"rope_theta", 0}}, "rope_theta (rope_theta) = 0 must be a positive finite number"},
      {{{"rope_theta", -3}}, "rope_theta (rope_theta) = -3 must be a positive finite number"},
  };
  for (const auto& [patch, message] : cases) {
    auto config = tiny_llama_config();
    config.update(patch);
    config.erase("rope_parameters");
    write_model(config, tensors);
    expect_error([&] { load(); }, {"config.json", message});
  }
}

// ---- sharded checkpoints ----

TEST_F(LoaderTest, ShardedCheckpointLoads) {
  write_config(tiny_llama_config());
  auto tensors = tiny_llama_tensors(tiny_llama_config());
  std::map<std::string, TensorSpec> a, b;
  nlohmann::json weight_map;
  bool first = true;
  for (auto& [name, t] : tensors) {
    (first ? a : b)[name] = t;
    weight_map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    first = !first;
  }
  write_file(dir_.path() / "model-00001-of-00002.safetensors", safetensors_bytes(a));
  write_file(dir_.path() / "model-00002-of-00002.safetensors", safetensors_bytes(b));
  std::ofstream(dir_.path() / "model.safetensors.index.json")
      << nlohmann::json{{"metadata", {}}, {"weight_map", weight_map}}.dump();
  EXPECT_EQ(load().weights.layers.size(), 1u);
}

TEST_F(LoaderTest, ShardIndexPointsToMissingFile) {
  write_config(tiny_llama_config());
  std::ofstream(dir_.path() / "model.safetensors.index.json")
      << R"({"weight_map": {"lm_head.weight": "model-00009-of-00009.safetensors"}})";
  expect_error([&] { load(); }, {"model-00009-of-00009.safetensors"});
}

TEST_F(LoaderTest, ShardIndexListsTensorTheShardLacks) {
  write_config(tiny_llama_config());
  write_file(dir_.path() / "shard.safetensors", safetensors_bytes(tiny_llama_tensors(tiny_llama_config())));
  std::ofstream(dir_.path() / "model.safetensors.index.json")
      << R"({"weight_map": {"ghost.weight": "shard.safetensors"}})";
  expect_error([&] { load(); }, {"ghost.weight", "shard.safetensors"});
}

TEST_F(LoaderTest, ShardIndexRejectsPathEscape) {
  write_config(tiny_llama_config());
  std::ofstream(dir_.path() / "model.safetensors.index.json")
      << R"({"weight_map": {"x": "../../etc/passwd"}})";
  expect_error([&] { load(); }, {"not a file in the model directory"});
}

}  // namespace
}  // namespace lmx

namespace lmx {
namespace {

// Every weight's canonical shape, in map_weights' order (absent weights as empty shapes).
std::vector<std::vector<int64_t>> weight_shapes(const ModelWeightRefs& w) {
  std::vector<std::vector<int64_t>> shapes;
  map_weights<WeightRef>(w, [&](const WeightRef& r, WeightKind) {
    shapes.push_back(r.shape);
    return WeightRef{};
  });
  return shapes;
}

// describe_weights (used to allocate random-weight models) must agree with what loading a real
// checkpoint resolves, for every parity fixture.
TEST(DescribeWeights, MatchesResolvedShapesOfEveryFixture) {
  namespace fs = std::filesystem;
  int checked = 0;
  for (const auto& e : fs::directory_iterator(fs::path(LMX_FIXTURES_DIR) / "parity")) {
    if (!fs::exists(e.path() / "config.json")) continue;
    const LoadedModel m = load_model(e.path());
    const ModelWeightRefs d = describe_weights(m.desc);
    EXPECT_EQ(weight_shapes(m.weights), weight_shapes(d)) << e.path();
    EXPECT_EQ(m.weights.lm_head_tied, d.lm_head_tied) << e.path();
    EXPECT_EQ(m.weights.lm_head.out, d.lm_head.out) << e.path();
    EXPECT_EQ(m.weights.lm_head.in, d.lm_head.in) << e.path();
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

}  // namespace
}  // namespace lmx
