// The model layer's data: each family's description from its config.json (both spellings, every
// switch), the loader's reordering of fused and interleaved tensors into the engine's layout,
// shard specs, and ALiBi slopes.
#include <cmath>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/backend/alibi.h"
#include "engine/core/error.h"
#include "engine/model/architecture.h"
#include "engine/model/known_shapes.h"
#include "engine/backend/cpu_backend.h"
#include "engine/model/model.h"
#include "engine/model/shard.h"
#include "tests/support/checkpoint_writer.h"

namespace lmx {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using namespace lmx::testing;

DecoderDesc describe(const json& config) {
  const ModelConfig c = ModelConfig::from_json(config, json::object());
  return find_architecture(c.architecture()).describe(c);
}

std::string error_of(const json& config) {
  try {
    describe(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

json neox(std::initializer_list<std::pair<const std::string, json>> extra = {}) {
  json c = {{"architectures", {"GPTNeoXForCausalLM"}}, {"hidden_size", 64}, {"num_hidden_layers", 2},
            {"num_attention_heads", 4}, {"intermediate_size", 96}, {"vocab_size", 100}};
  for (const auto& [k, v] : extra) c[k] = v;
  return c;
}

TEST(Families, GptjParallelSharedNormInterleavedRotary) {
  const DecoderDesc d = describe({{"architectures", {"GPTJForCausalLM"}}, {"n_embd", 64},
                                  {"n_layer", 2}, {"n_head", 4}, {"rotary_dim", 8},
                                  {"n_positions", 128}, {"vocab_size", 100}});
  EXPECT_TRUE(d.parallel_residual && d.shared_block_norm && !d.has_mlp_norm());
  EXPECT_EQ(d.rope.rotary_dim, 8);
  EXPECT_TRUE(d.rope.interleaved);
  EXPECT_TRUE(d.lm_head_bias && !d.qkv_bias && !d.o_bias && d.mlp_bias);
  EXPECT_FALSE(d.tie_word_embeddings);
  EXPECT_THAT(error_of({{"architectures", {"GPTJForCausalLM"}}, {"n_embd", 64}, {"n_layer", 2},
                        {"n_head", 4}, {"rotary_dim", nullptr}, {"n_positions", 128},
                        {"vocab_size", 100}}),
              HasSubstr("'rotary_dim' = null"));
}

TEST(Families, NeoxRotaryPctInBothSpellings) {
  const DecoderDesc legacy = describe(neox({{"rotary_pct", 0.25}, {"rotary_emb_base", 500.0}}));
  EXPECT_EQ(legacy.rope.rotary_dim, 4);
  EXPECT_FLOAT_EQ(legacy.rope.theta, 500.0f);
  const DecoderDesc v5 = describe(neox({{"rope_parameters", {{"rope_type", "default"},
                                                             {"rope_theta", 500.0},
                                                             {"partial_rotary_factor", 0.25}}}}));
  EXPECT_EQ(v5.rope.rotary_dim, 4);
  EXPECT_FLOAT_EQ(v5.rope.theta, 500.0f);
  EXPECT_EQ(describe(neox()).rope.rotary_dim, 4);  // rotary_pct defaults to 0.25
  EXPECT_TRUE(legacy.parallel_residual);  // transformers' default
  EXPECT_FALSE(describe(neox({{"use_parallel_residual", false}})).parallel_residual);
  const DecoderDesc no_bias = describe(neox({{"attention_bias", false}}));
  EXPECT_FALSE(no_bias.qkv_bias || no_bias.o_bias);
  EXPECT_TRUE(no_bias.mlp_bias);
}

TEST(Families, GptNeoAttentionTypesAndUnscaledAttention) {
  const json c = {{"architectures", {"GPTNeoForCausalLM"}}, {"hidden_size", 64}, {"num_layers", 4},
                  {"num_heads", 4}, {"max_position_embeddings", 128}, {"vocab_size", 100},
                  {"window_size", 6}, {"attention_types", {{{"global", "local"}, 2}}}};
  const DecoderDesc d = describe(c);
  EXPECT_EQ(d.sliding_window, (std::vector<int>{0, 6, 0, 6}));
  EXPECT_FLOAT_EQ(d.attention_scale(), 1.0f);
  EXPECT_EQ(d.positions, PositionKind::LearnedAbsolute);
  json bad = c;
  bad["attention_types"] = {{{"global", "sparse"}, 2}};
  EXPECT_THAT(error_of(bad), HasSubstr("'sparse'"));
  bad["attention_types"] = {{{"global", "local"}, 3}};
  EXPECT_THAT(error_of(bad), HasSubstr("describes 6 layers"));
  json saved = c;  // a saved attention_layers wins over attention_types
  saved["attention_layers"] = {"local", "local", "global", "global"};
  EXPECT_EQ(describe(saved).sliding_window, (std::vector<int>{6, 6, 0, 0}));
}

TEST(Families, OptSwitches) {
  json c = {{"architectures", {"OPTForCausalLM"}}, {"hidden_size", 64}, {"ffn_dim", 96},
            {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"vocab_size", 100},
            {"max_position_embeddings", 128}, {"word_embed_proj_dim", 48}};
  const DecoderDesc pre = describe(c);
  EXPECT_EQ(pre.position_offset, 2);
  EXPECT_EQ(pre.embed_dim, 48);
  EXPECT_TRUE(pre.projects_embeddings());
  EXPECT_EQ(pre.norm_placement, NormPlacement::Pre);
  EXPECT_TRUE(pre.final_norm);
  EXPECT_EQ(pre.activation, Activation::Relu);
  c["do_layer_norm_before"] = false;
  const DecoderDesc post = describe(c);
  EXPECT_EQ(post.norm_placement, NormPlacement::Post);
  EXPECT_FALSE(post.final_norm);
  c["do_layer_norm_before"] = true;
  c["enable_bias"] = false;
  EXPECT_FALSE(describe(c).qkv_bias || describe(c).mlp_bias);
  c["layer_norm_elementwise_affine"] = false;
  EXPECT_THAT(error_of(c), HasSubstr("'layer_norm_elementwise_affine' = false"));
}

TEST(Families, BloomAlibiAndEmbeddingNorm) {
  json c = {{"architectures", {"BloomForCausalLM"}}, {"hidden_size", 96}, {"n_layer", 2},
            {"n_head", 6}, {"vocab_size", 100}};
  const DecoderDesc d = describe(c);
  EXPECT_EQ(d.positions, PositionKind::Alibi);
  EXPECT_TRUE(d.embedding_norm && d.qkv_bias && d.tie_word_embeddings);
  EXPECT_EQ(d.intermediate_size, 384);
  EXPECT_FALSE(d.residual_from_norm);
  c["apply_residual_connection_post_layernorm"] = true;
  EXPECT_TRUE(describe(c).residual_from_norm);
  c["pretraining_tp"] = 4;  // not math on its own
  EXPECT_NO_THROW(describe(c));
  c["slow_but_exact"] = true;
  EXPECT_THAT(error_of(c), HasSubstr("'slow_but_exact' = true"));
}

TEST(Families, UnknownFamilyListsEverySupportedOne) {
  const std::string e = error_of({{"architectures", {"FalconForCausalLM"}}});
  for (const char* name : {"GPTJForCausalLM", "GPTNeoXForCausalLM", "GPTNeoForCausalLM",
                           "OPTForCausalLM", "BloomForCausalLM", "LlamaForCausalLM"})
    EXPECT_THAT(e, HasSubstr(name));
}

TEST(Families, KnownShapesGoThroughTheirFamilies) {
  for (const std::string& name : known_shape_names()) {
    SCOPED_TRACE(name);
    const DecoderDesc d = known_shape(name);
    EXPECT_GT(d.num_layers, 0);
  }
  EXPECT_EQ(known_shape("gpt-j-6b").head_dim, 256);
  EXPECT_EQ(known_shape("bloom-7b1").vocab_size, 250880);
}

// ALiBi slopes against transformers' formula, written out for 8 and 6 heads.
TEST(Alibi, SlopesMatchBloomFormula) {
  const auto eight = alibi_slopes(8);  // 2^-1, 2^-2, ..., 2^-8
  ASSERT_EQ(eight.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(eight[size_t(i)], std::pow(2.0f, -float(i + 1)));
  const auto six = alibi_slopes(6);  // 4 at 2^(-2 i), then 2 at 2^(-1), 2^(-3)
  const std::vector<float> expect = {0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f};
  ASSERT_EQ(six.size(), expect.size());
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_FLOAT_EQ(six[i], expect[i]);
}

TEST(ShardSpec, ColumnGroupsSplitOnHeadBoundaries) {
  const ShardSpec qkv = ShardSpec::column({32, 16, 16}, 8, {false, true, true});  // 4 q, 2 kv heads of 8
  const auto r1 = shard_ranges(qkv, 64, 1, 2);
  EXPECT_EQ(r1, (std::vector<std::pair<int64_t, int64_t>>{{16, 32}, {40, 48}, {56, 64}}));
  // 2 kv heads over 4 ranks: each kv head replicated on 2 ranks, q split.
  EXPECT_EQ(shard_ranges(qkv, 64, 3, 4),
            (std::vector<std::pair<int64_t, int64_t>>{{24, 32}, {40, 48}, {56, 64}}));
  EXPECT_THROW(shard_ranges(qkv, 64, 0, 3), Error);  // 4 q heads over 3 ranks
  const ShardSpec q_only = ShardSpec::column({32, 16, 16}, 8);  // nothing may replicate
  EXPECT_THROW(shard_ranges(q_only, 64, 0, 4), Error);
  const ShardSpec vocab = ShardSpec::vocab(10);
  EXPECT_EQ(shard_ranges(vocab, 10, 3, 4), (std::vector<std::pair<int64_t, int64_t>>{{9, 10}}));
  const ShardSpec rep = ShardSpec::replicated();
  EXPECT_EQ(shard_ranges(rep, 10, 1, 2), (std::vector<std::pair<int64_t, int64_t>>{{0, 10}}));
}

// Tensor-parallel degrees that do not split a model are errors naming the numbers.
TEST(TensorParallelDegree, BadDegreesNameTheNumbers) {
  DecoderDesc d;
  d.num_heads = 12;
  d.num_kv_heads = 3;
  d.intermediate_size = 96;
  const auto error = [&](int degree) {
    try {
      rank_desc(d, {0, degree});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error(5), HasSubstr("12 attention heads do not split over tensor_parallel_degree 5"));
  EXPECT_THAT(error(2), HasSubstr("3 key/value heads do not split over tensor_parallel_degree 2"));
  EXPECT_EQ(error(3), "no error");
  d.intermediate_size = 102;
  EXPECT_THAT(error(4), HasSubstr("3 key/value heads"));
  d.num_kv_heads = 12;
  EXPECT_THAT(error(4), HasSubstr("intermediate size 102 does not split over tensor_parallel_degree 4"));
  d.num_kv_heads = 1;  // MQA: the one KV head replicated on every rank
  d.intermediate_size = 96;
  const DecoderDesc r = rank_desc(d, {3, 4});
  EXPECT_EQ(r.num_heads, 3);
  EXPECT_EQ(r.num_kv_heads, 1);
  EXPECT_EQ(r.intermediate_size, 24);

  const LoadedModel m = load_model(std::string(LMX_FIXTURES_DIR) + "/parity/llama_mha_tied");
  EXPECT_THROW(make_cpu_backend(m, {16, 8}, 0), Error);
  try {
    make_cpu_backend(m, {16, 8}, 3);
    ADD_FAILURE() << "degree 3 split 4 heads";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("4 attention heads do not split over tensor_parallel_degree 3"));
  }
}

// Loading reorders NeoX's per-head fused q/k/v ([heads, 3, head_dim] rows) into q | k | v, and
// the interleaved rotary pairs of GPT-J into rotate-half order; row r of the stored tensor holds
// the value r in every column, so the materialized rows show where each came from.
class Reorder : public ::testing::Test {
 protected:
  std::vector<float> qkv_rows(const json& config, const std::map<std::string, TensorSpec>& tensors,
                              int cols) {
    std::ofstream(dir_.path() / "config.json") << config.dump();
    write_file(dir_.path() / "model.safetensors", safetensors_bytes(tensors));
    const LoadedModel m = load_model(dir_.path());
    const std::vector<float> w = materialize_f32(m.weights.layers[0].qkv.weight);
    std::vector<float> rows;
    for (size_t r = 0; r < w.size() / size_t(cols); ++r) rows.push_back(w[r * size_t(cols)]);
    return rows;
  }
  static TensorSpec rows_numbered(int64_t rows, int64_t cols, float offset = 0) {
    TensorSpec t{"F32", {rows, cols}, {}};
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t.values.push_back(offset + float(r));
    return t;
  }
  static TensorSpec zeros(std::vector<int64_t> shape) { return {"F32", std::move(shape), {}}; }
  TempDir dir_;
};

TEST_F(Reorder, NeoxPerHeadQkv) {
  // hidden 8, 2 heads of 4: stored rows [h0 q, h0 k, h0 v, h1 q, h1 k, h1 v] x 4 dims.
  const json c = neox({{"hidden_size", 8}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                       {"intermediate_size", 8}, {"vocab_size", 10}, {"rotary_pct", 1.0}});
  std::map<std::string, TensorSpec> t;
  const std::string L = "gpt_neox.layers.0.";
  t["gpt_neox.embed_in.weight"] = zeros({10, 8});
  t["embed_out.weight"] = zeros({10, 8});
  for (const std::string& n : std::vector<std::string>{
           "gpt_neox.final_layer_norm.", L + "input_layernorm.", L + "post_attention_layernorm."}) {
    t[n + "weight"] = zeros({8});
    t[n + "bias"] = zeros({8});
  }
  t[L + "attention.query_key_value.weight"] = rows_numbered(24, 8);
  t[L + "attention.query_key_value.bias"] = zeros({24});
  t[L + "attention.dense.weight"] = zeros({8, 8});
  t[L + "attention.dense.bias"] = zeros({8});
  t[L + "mlp.dense_h_to_4h.weight"] = zeros({8, 8});
  t[L + "mlp.dense_h_to_4h.bias"] = zeros({8});
  t[L + "mlp.dense_4h_to_h.weight"] = zeros({8, 8});
  t[L + "mlp.dense_4h_to_h.bias"] = zeros({8});
  const std::vector<float> expect = {0, 1, 2, 3, 12, 13, 14, 15,      // q of heads 0, 1
                                     4, 5, 6, 7, 16, 17, 18, 19,      // k
                                     8, 9, 10, 11, 20, 21, 22, 23};   // v
  EXPECT_EQ(qkv_rows(c, t, 8), expect);
}

TEST_F(Reorder, GptjInterleavedRotaryRows) {
  // hidden 8, 1 head of 8, rotary_dim 4: dims (0 1 2 3) pair as (0,1) (2,3) -> rotate-half
  // order 0 2 1 3; dims 4-7 do not rotate; v keeps its order.
  const json c = {{"architectures", {"GPTJForCausalLM"}}, {"n_embd", 8}, {"n_layer", 1},
                  {"n_head", 1}, {"rotary_dim", 4}, {"n_positions", 16}, {"vocab_size", 10},
                  {"n_inner", 8}};
  std::map<std::string, TensorSpec> t;
  const std::string L = "transformer.h.0.";
  t["transformer.wte.weight"] = zeros({10, 8});
  t["lm_head.weight"] = zeros({10, 8});
  t["lm_head.bias"] = zeros({10});
  for (const std::string& n : std::vector<std::string>{"transformer.ln_f.", L + "ln_1."}) {
    t[n + "weight"] = zeros({8});
    t[n + "bias"] = zeros({8});
  }
  t[L + "attn.q_proj.weight"] = rows_numbered(8, 8);
  t[L + "attn.k_proj.weight"] = rows_numbered(8, 8, 100);
  t[L + "attn.v_proj.weight"] = rows_numbered(8, 8, 200);
  t[L + "attn.out_proj.weight"] = zeros({8, 8});
  t[L + "mlp.fc_in.weight"] = zeros({8, 8});
  t[L + "mlp.fc_in.bias"] = zeros({8});
  t[L + "mlp.fc_out.weight"] = zeros({8, 8});
  t[L + "mlp.fc_out.bias"] = zeros({8});
  const std::vector<float> expect = {0,   2,   1,   3,   4,   5,   6,   7,
                                     100, 102, 101, 103, 104, 105, 106, 107,
                                     200, 201, 202, 203, 204, 205, 206, 207};
  EXPECT_EQ(qkv_rows(c, t, 8), expect);
}

}  // namespace
}  // namespace lmx
