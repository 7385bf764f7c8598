// config.json readers: both spellings (legacy and transformers 5), rope scaling, sliding windows,
// token ids, and the architectures' descriptions.
#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "engine/backend/rope.h"
#include "engine/core/error.h"
#include "engine/model/architecture.h"
#include "tests/support/checkpoint_writer.h"

namespace lmx {
namespace {

using json = nlohmann::json;

DecoderDesc describe(const json& config, const json& generation = json::object()) {
  const ModelConfig c = ModelConfig::from_json(config, generation);
  return find_architecture(c.architecture()).describe(c);
}

json llama_with(std::initializer_list<std::pair<const std::string, json>> extra) {
  json c = testing::tiny_llama_config();
  c.erase("rope_theta");
  for (const auto& [k, v] : extra) c[k] = v;
  return c;
}

TEST(ModelConfig, LegacyAndV5RopeSpellingsAgree) {
  const json params = {{"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 32}};
  json legacy_scaling = params;
  legacy_scaling["rope_type"] = "llama3";
  json v5 = params;
  v5["rope_type"] = "llama3";
  v5["rope_theta"] = 500000.0;
  const DecoderDesc a = describe(llama_with({{"rope_theta", 500000.0}, {"rope_scaling", legacy_scaling},
                                             {"torch_dtype", "bfloat16"}}));
  const DecoderDesc b = describe(llama_with({{"rope_parameters", v5}, {"dtype", "bfloat16"}}));
  EXPECT_EQ(a.rope.scaling, RopeScalingKind::Llama3);
  EXPECT_EQ(rope_inv_freq(a.rope), rope_inv_freq(b.rope));
  EXPECT_FLOAT_EQ(a.rope.theta, 500000.0f);
  EXPECT_FLOAT_EQ(b.rope.theta, 500000.0f);
  EXPECT_EQ(a.rope.original_max_position, 32);
}

TEST(ModelConfig, DtypeInBothSpellings) {
  EXPECT_EQ(ModelConfig::from_json({{"torch_dtype", "float16"}}, {}).dtype(), "float16");
  EXPECT_EQ(ModelConfig::from_json({{"dtype", "bfloat16"}}, {}).dtype(), "bfloat16");
}

TEST(ModelConfig, LegacyTypeKeyInRopeScaling) {
  const DecoderDesc d = describe(llama_with({{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}}));
  EXPECT_EQ(d.rope.scaling, RopeScalingKind::Linear);
  const auto inv = rope_inv_freq(d.rope);
  EXPECT_FLOAT_EQ(inv[0], 0.5f);
}

// Independent double-precision llama3 frequencies (the published formula) vs the engine's fp32.
TEST(RopeInvFreq, Llama3MatchesFormulaInEveryBand) {
  RopeDesc r;
  r.theta = 500000.0f;
  r.rotary_dim = 64;
  r.scaling = RopeScalingKind::Llama3;
  r.factor = 8.0f;
  r.low_freq_factor = 1.0f;
  r.high_freq_factor = 4.0f;
  r.original_max_position = 64;
  const auto inv = rope_inv_freq(r);
  int bands[3] = {0, 0, 0};
  for (int i = 0; i < 32; ++i) {
    const double f = 1.0 / std::pow(500000.0, 2.0 * i / 64.0);
    const double wavelen = 2 * std::numbers::pi / f;
    double expected;
    if (wavelen < 64.0 / 4.0) {
      expected = f, ++bands[0];
    } else if (wavelen > 64.0 / 1.0) {
      expected = f / 8.0, ++bands[2];
    } else {
      const double s = (64.0 / wavelen - 1.0) / (4.0 - 1.0);
      expected = (1 - s) * f / 8.0 + s * f, ++bands[1];
    }
    EXPECT_NEAR(inv[i], expected, 1e-6 * expected + 1e-12) << "i=" << i;
  }
  EXPECT_GT(bands[0], 0);
  EXPECT_GT(bands[1], 0);
  EXPECT_GT(bands[2], 0);
}

TEST(ModelConfig, PartialRotary) {
  const DecoderDesc d = describe(llama_with({{"partial_rotary_factor", 0.5}}));
  EXPECT_EQ(d.rope.rotary_dim, d.head_dim / 2);
}

TEST(ModelConfig, LayerTypesGiveSlidingWindows) {
  json c = llama_with({{"sliding_window", 6}});
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["num_hidden_layers"] = 3;
  c["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention"};
  EXPECT_EQ(describe(c).sliding_window, (std::vector<int>{0, 6, 6}));
  c["layer_types"] = {"full_attention", "chunked_attention", "full_attention"};
  EXPECT_THROW(describe(c), Error);
}

TEST(ModelConfig, Qwen2LegacySlidingRule) {
  json c = llama_with({{"sliding_window", 5}, {"use_sliding_window", true}, {"max_window_layers", 2}});
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["num_hidden_layers"] = 3;
  const DecoderDesc d = describe(c);
  EXPECT_EQ(d.sliding_window, (std::vector<int>{0, 0, 5}));
  EXPECT_TRUE(d.qkv_bias);
  EXPECT_FALSE(d.o_bias);
  c["use_sliding_window"] = false;
  EXPECT_EQ(describe(c).sliding_window, (std::vector<int>{0, 0, 0}));
}

TEST(ModelConfig, MistralSlidingWindowNullMeansFull) {
  json c = llama_with({{"sliding_window", nullptr}});
  c["architectures"] = {"MistralForCausalLM"};
  EXPECT_EQ(describe(c).sliding_window, (std::vector<int>{0}));
  c["sliding_window"] = 4096;
  EXPECT_EQ(describe(c).sliding_window, (std::vector<int>{4096}));
}

TEST(ModelConfig, LlamaBiasesAndExplicitHeadDim) {
  const DecoderDesc d = describe(llama_with({{"attention_bias", true}, {"mlp_bias", true}, {"head_dim", 8}}));
  EXPECT_TRUE(d.qkv_bias && d.o_bias && d.mlp_bias);
  EXPECT_EQ(d.head_dim, 8);
  EXPECT_EQ(d.q_size(), 32);
}

TEST(ModelConfig, Gpt2Description) {
  const json c = {{"architectures", {"GPT2LMHeadModel"}}, {"n_embd", 64}, {"n_layer", 2},
                  {"n_head", 4}, {"n_positions", 128}, {"vocab_size", 100},
                  {"activation_function", "gelu_new"}, {"n_inner", nullptr}};
  const DecoderDesc d = describe(c);
  EXPECT_EQ(d.norm, NormKind::LayerNorm);
  EXPECT_EQ(d.positions, PositionKind::LearnedAbsolute);
  EXPECT_EQ(d.mlp, MlpKind::Plain);
  EXPECT_EQ(d.intermediate_size, 256);
  EXPECT_EQ(d.activation, Activation::GeluTanh);
  EXPECT_TRUE(d.tie_word_embeddings);
  EXPECT_FLOAT_EQ(d.norm_eps, 1e-5f);
}

// An integer past int's range is an error naming the key, not the number it would wrap to; and a
// hidden size whose default MLP width (4 x hidden) passes it is refused, not overflowed (found by
// the model_config fuzz target: GPT-Neo with hidden_size 6444444444444).
TEST(ModelConfig, IntegersPastIntRangeAreRefused) {
  const json gpt2 = {{"architectures", {"GPT2LMHeadModel"}},
                     {"n_embd", 64},
                     {"n_layer", 2},
                     {"n_head", 4},
                     {"n_positions", 128},
                     {"vocab_size", 100}};
  for (const json& big :
       {json(int64_t(6444444444444)), json(uint64_t(1) << 63), json(int64_t(-3000000000))}) {
    json c = gpt2;
    c["n_embd"] = big;
    try {
      describe(c);
      ADD_FAILURE() << "n_embd = " << big.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'n_embd' = " + big.dump() + " is out of range"),
                std::string::npos)
          << e.what();
    }
  }
  json c = gpt2;
  c["n_embd"] = 1993500444;  // a multiple of the 4 heads whose 4 x overflows an int
  try {
    describe(c);
    ADD_FAILURE() << "n_embd = 1993500444 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hidden size 1993500444 is too large"), std::string::npos)
        << e.what();
  }
  c["n_inner"] = 256;  // an explicit MLP width needs no default
  EXPECT_EQ(describe(c).intermediate_size, 256);
}

TEST(ModelConfig, UnsupportedActivationNamesAllowed) {
  EXPECT_THROW(describe(llama_with({{"hidden_act", "mish"}})), Error);
}

TEST(ModelConfig, HeadsNotMultipleOfKvHeads) {
  EXPECT_THROW(describe(llama_with({{"num_key_value_heads", 3}})), Error);
}

TEST(ModelConfig, GenerationConfigEosWins) {
  const DecoderDesc d = describe(llama_with({}), {{"eos_token_id", {2, 7}}, {"bos_token_id", 1}});
  EXPECT_EQ(d.eos_token_ids, (std::vector<int>{2, 7}));
  EXPECT_EQ(d.bos_token_id, 1);
  EXPECT_EQ(describe(llama_with({})).eos_token_ids, (std::vector<int>{2}));
}

}  // namespace
}  // namespace lmx
