// dynamic_int8 under tensor parallelism on the CPU reference (docs/quantization.md, "Tensor
// parallelism"): each rank quantizes the slice it materialized.
//  - Grouped, with a group that divides every rank's input columns: a rank's groups are exactly
//    the groups of the whole weight (column- and vocab-parallel ranks hold whole rows; a
//    row-parallel rank's columns start on a group boundary), so the int8 values and scales are
//    the same bytes and degree 2 must give degree 1's greedy tokens and, as fp32 tensor
//    parallelism does, logits within 1e-4 of the largest (only the summation order differs).
//  - Per channel: column- and vocab-parallel scales are unchanged, but a row-parallel rank (o,
//    down) scales each row over its own half of the columns. Degree 2 per-channel is therefore
//    not degree 1 per-channel; it is exactly degree 1 with o and down quantized in groups of
//    in / 2 and every other projection per channel, and that is what is tested.
#include <numeric>

#include <gtest/gtest.h>

#include "engine/backend/cpu_backend.h"
#include "engine/core/error.h"
#include "engine/generate/generator.h"
#include "engine/model/model.h"
#include "engine/model/quantization.h"
#include "engine/model/shard.h"
#include "tests/support/parity_fixtures.h"

namespace lmx {
namespace {

using testing::open_parity_fixture;

constexpr int kDegree = 2;

struct Outputs {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> prompt_logits;
};

// Greedy generation of every fixture prompt at `degree`, with the last prompt position's logits.
Outputs generate(const LoadedModel& model, const nlohmann::json& cases, int degree) {
  Outputs out;
  for (const nlohmann::json& c : cases) {
    GenerationRequest r;
    r.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    r.params.max_new_tokens = int(c["greedy_ids"].size());
    r.params.ignore_eos = true;
    r.params.return_prompt_logits = true;
    const int tokens = int(r.prompt.size()) + r.params.max_new_tokens;
    auto backend = make_cpu_backend(model, {16, (tokens + 15) / 16}, degree);
    Generator gen(*backend);
    GenerationResult g = gen.generate(std::span(&r, 1)).front();
    out.tokens.push_back(g.tokens);
    out.prompt_logits.push_back(g.prompt_logits);
  }
  return out;
}

void expect_same(const Outputs& split, const Outputs& whole) {
  ASSERT_EQ(split.tokens.size(), whole.tokens.size());
  for (size_t i = 0; i < whole.tokens.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    EXPECT_EQ(split.tokens[i], whole.tokens[i]);
    const auto& a = split.prompt_logits[i];
    const auto& b = whole.prompt_logits[i];
    ASSERT_EQ(a.size(), b.size());
    float max_b = 0, max_err = 0;
    for (size_t v = 0; v < b.size(); ++v) {
      max_b = std::max(max_b, std::abs(b[v]));
      max_err = std::max(max_err, std::abs(a[v] - b[v]));
    }
    EXPECT_LE(max_err, 1e-4f * max_b);
  }
}

// The input columns a projection holds on a rank: row-parallel ones (o, down) are split.
int64_t rank_in(const LinearRef& l) {
  return l.shard.kind == ShardKind::Row ? l.in / kDegree : l.in;
}

// The largest group (up to 128) dividing every projection's input columns on every rank.
int64_t common_group(ModelWeightRefs& w) {
  int64_t g = 0;
  for_each_linear(w, [&](LinearRef& l, const std::string&) { g = std::gcd(g, rank_in(l)); });
  int64_t best = 1;
  for (int64_t d = 1; d <= std::min<int64_t>(g, 128); ++d)
    if (g % d == 0) best = d;
  return best;
}

class Int8TensorParallel : public ::testing::TestWithParam<std::string> {};

TEST_P(Int8TensorParallel, GroupedSplitEqualsWhole) {
  const auto f = open_parity_fixture(GetParam());
  LoadedModel model = load_model(f.model_dir);
  const int64_t group = common_group(model.weights);
  SCOPED_TRACE("group " + std::to_string(group));
  request_quantization(model.weights, {QuantKind::W8A16Grouped, group});
  expect_same(generate(model, f.expected["cases"], kDegree), generate(model, f.expected["cases"], 1));
}

TEST_P(Int8TensorParallel, PerChannelSplitEqualsWholeWithRowParallelHalves) {
  const auto f = open_parity_fixture(GetParam());
  LoadedModel split = load_model(f.model_dir, dynamic_int8());
  LoadedModel whole = load_model(f.model_dir, dynamic_int8());
  for (LayerWeightRefs& l : whole.weights.layers) {
    l.o.quant = {QuantKind::W8A16Grouped, l.o.in / kDegree};
    l.down.quant = {QuantKind::W8A16Grouped, l.down.in / kDegree};
  }
  expect_same(generate(split, f.expected["cases"], kDegree), generate(whole, f.expected["cases"], 1));
}

// Every family, and layouts: tied / untied heads, MHA / MQA (replicated KV heads), biases,
// Conv1D, fused q/k/v per head (NeoX, Bloom with ALiBi), OPT's replicated projections, partial
// rotary, sliding windows, local attention, a real model.
INSTANTIATE_TEST_SUITE_P(Fixtures, Int8TensorParallel,
                         ::testing::Values("llama_mha_tied", "llama_mqa_bf16_sharded", "gpt2",
                                           "bloom_4heads", "opt_post_ln_proj", "gptj_partial_rotary",
                                           "qwen2_bias_tied", "mistral_sliding", "gpt_neox_parallel",
                                           "gpt_neo_mixed_local", "real_stories260k"));

// A backend that cannot hold quantized weights refuses them when it maps the description
// (map_weights): what keeps the CUDA backend from computing fp16 for a dynamic_int8 request.
TEST(Int8Backends, MappingAQuantizedLinearToABackendWithoutStorageThrows) {
  const auto f = open_parity_fixture("llama_mha_tied");
  const LoadedModel model = load_model(f.model_dir, dynamic_int8());
  struct Device {  // a stand-in for a device buffer with no QuantStorage specialization
    bool empty() const { return true; }
  };
  static_assert(!kHoldsQuantized<Device>);
  try {
    map_weights<Device>(model.weights, [](const WeightRef&, WeightKind) { return Device{}; });
    FAIL() << "a quantized model mapped onto a backend that cannot hold it";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be held by this backend yet"), std::string::npos)
        << e.what();
  }
  const LoadedModel plain = load_model(f.model_dir);
  EXPECT_NO_THROW(map_weights<Device>(plain.weights, [](const WeightRef&, WeightKind) { return Device{}; }));
}

// all_logits on one rank gives, row by row, what feeding the tokens one at a time gives; a
// tensor-parallel group does not offer it.
TEST(Int8Backends, AllLogitsEqualTokenByTokenLogits) {
  const auto f = open_parity_fixture("real_stories260k");
  for (const LinearQuant& quant : {LinearQuant{}, dynamic_int8(), dynamic_int8(4)}) {
    const LoadedModel model = load_model(f.model_dir, quant);
    auto all = make_cpu_backend(model, {16, 4});
    auto one = make_cpu_backend(model, {16, 4});
    ASSERT_TRUE(all->supports_all_logits());
    const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 429, 270, 16, 300, 33};
    const std::vector<int32_t> table = {0, 1, 2, 3};
    BatchChunk chunk{ids, 0, table, true, true};
    std::vector<float> rows, row;
    all->forward(std::span(&chunk, 1), rows);
    const size_t V = size_t(model.desc.vocab_size);
    ASSERT_EQ(rows.size(), ids.size() * V);
    for (size_t i = 0; i < ids.size(); ++i) {
      BatchChunk step{std::span(ids).subspan(i, 1), int(i), table, true, false};
      one->forward(std::span(&step, 1), row);
      for (size_t v = 0; v < V; ++v)
        ASSERT_NEAR(rows[i * V + v], row[v], 1e-4f * (1 + std::abs(row[v]))) << "position " << i;
    }
  }
  const LoadedModel model = load_model(f.model_dir);
  EXPECT_FALSE(make_cpu_backend(model, {16, 4}, kDegree)->supports_all_logits());
}

}  // namespace
}  // namespace lmx
