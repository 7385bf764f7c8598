// option.quantize=dynamic_int8 (and fp8) takes effect through the engine API (what lmx-server and
// the plugin run): with each spelling of the setting the engine's greedy tokens are those of the
// int8 CPU backend, which differ from fp32's on this prompt (a near-tie that int8 reorders, see
// docs/quantization.md), so the test tells a quantized engine from an unquantized one.
#include <map>

#include <gtest/gtest.h>

#include "engine/api/engine.h"
#include "engine/backend/cpu_backend.h"
#include "engine/generate/generator.h"
#include "engine/model/model.h"
#include "engine/model/quantization.h"
#include "engine/tokenizer/tokenizer.h"
#include "properties/serving_config.h"
#include "tests/support/served_tokens.h"

namespace lmx {
namespace {

const std::filesystem::path kModel =
    std::filesystem::path(LMX_SHARED_MODELS_DIR) / "tinystories-656k";
constexpr const char* kPrompt = "One day, Mia found";
constexpr int kNewTokens = 8;

std::vector<int32_t> engine_tokens(std::map<std::string, std::string> env) {
  return testing::served_greedy_tokens(kModel, std::move(env), kPrompt, kNewTokens);
}

std::vector<int32_t> backend_tokens(const LinearQuant& quant) {
  const LoadedModel model = load_model(kModel, quant);
  GenerationRequest r;
  r.prompt = Tokenizer::from_model_dir(kModel).encode(kPrompt);
  r.params.max_new_tokens = kNewTokens;
  r.params.ignore_eos = true;
  auto backend = make_cpu_backend(model, {16, 4});
  Generator gen(*backend);
  return gen.generate(std::span(&r, 1)).front().tokens;
}

TEST(EngineInt8, EverySpellingRunsTheInt8Model) {
  const std::vector<int32_t> int8 = backend_tokens(dynamic_int8());
  const std::vector<int32_t> fp32 = backend_tokens({});
  ASSERT_NE(int8, fp32) << "the prompt no longer tells int8 from fp32";
  EXPECT_EQ(engine_tokens({}), fp32);
  EXPECT_EQ(engine_tokens({{"OPTION_QUANTIZE", "dynamic_int8"}}), int8);
  EXPECT_EQ(engine_tokens({{"HF_MODEL_QUANTIZE", "dynamic_int8"}}), int8);
  EXPECT_EQ(engine_tokens({{"OPTION_DTYPE", "int8"}}), int8);
  const std::vector<int32_t> grouped = backend_tokens(dynamic_int8(128));
  EXPECT_EQ(engine_tokens({{"OPTION_QUANTIZE", "dynamic_int8"}, {"OPTION_QUANTIZE_GROUP_SIZE", "128"}}),
            grouped);
}

// option.quantize=fp8 through the engine API runs the E4M3 CPU backend (its tokens, which the
// prompt tells from fp32's), the decoder's projections quantized and the LM head not.
TEST(EngineFp8, TheSettingRunsTheFp8Model) {
  const LinearQuant fp8{QuantKind::Fp8};
  const std::vector<int32_t> e4m3 = backend_tokens(fp8);
  const std::vector<int32_t> fp32 = backend_tokens({});
  ASSERT_NE(e4m3, fp32) << "the prompt no longer tells fp8 from fp32";
  EXPECT_EQ(engine_tokens({{"OPTION_QUANTIZE", "fp8"}}), e4m3);
  const LoadedModel model = load_model(kModel, fp8);
  EXPECT_EQ(model.weights.layers[0].qkv.quant.kind, QuantKind::Fp8);
  EXPECT_EQ(model.weights.layers[0].down.quant.kind, QuantKind::Fp8);
  EXPECT_FALSE(model.weights.lm_head.quant.quantized());
}

TEST(EngineInt8, GroupSizeThatDoesNotDivideFailsTheLoad) {
  // 256 divides no input size of tinystories-656k (128, 384).
  const auto config = properties::load_serving_config(
      kModel,
      properties::Environment::from_map(
          {{"OPTION_QUANTIZE", "dynamic_int8"}, {"OPTION_QUANTIZE_GROUP_SIZE", "256"}}, 0),
      properties::EngineCapabilities::this_build());
  try {
    Engine::create(config);
    FAIL() << "a group of 256 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("group size 256 does not divide its 128 input columns"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lmx
