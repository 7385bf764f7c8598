// Parity with Hugging Face transformers on the CPU backend, fp32 (fixtures made by
// scripts/make_parity_fixtures.py; see tests/fixtures/parity/README.md).
//  - greedy ids equal HF's exactly for every prompt (lengths 1, 7, 33; 24-32 new tokens);
//  - logits at the last prompt position and at the first 4 decode steps (the distributions that
//    chose generated tokens 1..4, so the decode path through the KV cache is checked too) within
//    max|ours - hf| <= 1e-4 * max|hf| (fp32 with a different summation order than torch's:
//    observed errors are ~1e-6 relative, so 1e-4 leaves margin without hiding a real bug, which
//    moves logits by >1e-2);
//  - a ragged batch of all prompts gives the same tokens as each prompt alone.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/backend/cpu_backend.h"
#include "engine/generate/generator.h"
#include "engine/core/error.h"
#include "engine/model/model.h"
#include "engine/model/shard.h"
#include "tests/support/parity_fixtures.h"
#include "tests/support/splitting_degrees.h"

namespace lmx {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using testing::open_parity_fixture;
using testing::parity_fixture_names;

std::vector<GenerationRequest> greedy_requests(const json& cases, bool with_logits) {
  std::vector<GenerationRequest> requests;
  for (const json& c : cases) {
    GenerationRequest r;
    r.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    r.params.max_new_tokens = int(c["greedy_ids"].size());
    r.params.ignore_eos = true;  // HF's reference loop does not stop at eos
    r.params.return_prompt_logits = with_logits;
    if (with_logits) r.params.return_step_logits = testing::step_logits(c);
    requests.push_back(std::move(r));
  }
  return requests;
}

std::unique_ptr<Backend> backend_for(const LoadedModel& m, int sequences, int tokens_each,
                                     int tensor_parallel_degree = 1) {
  const int block = 16;
  return make_cpu_backend(m, {block, sequences * ((tokens_each + block - 1) / block)},
                          tensor_parallel_degree);
}

class HfParity : public ::testing::TestWithParam<std::string> {};

TEST_P(HfParity, GreedyTokensAndLogitsAlone) {
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  EXPECT_EQ(model.desc.architecture, f.expected["architecture"].get<std::string>());
  const auto requests = greedy_requests(f.expected["cases"], true);
  for (size_t i = 0; i < requests.size(); ++i) {
    const json& c = f.expected["cases"][i];
    SCOPED_TRACE("prompt length " + std::to_string(requests[i].prompt.size()));
    auto backend = backend_for(model, 1, int(requests[i].prompt.size()) + requests[i].params.max_new_tokens);
    Generator gen(*backend);
    const GenerationResult r = gen.generate(std::span(&requests[i], 1)).front();
    EXPECT_EQ(r.tokens, c["greedy_ids"].get<std::vector<int32_t>>());

    testing::expect_case_logits_near(r, c, 1e-4);
  }
}

// The CPU reference split over 2, 3 or 4 ranks (threads over the in-process communicator; KV
// heads replicated past their count, the vocabulary padded where it does not divide): the same
// greedy ids and, within the same 1e-4 of HF, the same logits at the prompt and decode steps.
TEST_P(HfParity, TensorParallelRanksMatchTransformers) {
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  const auto degrees = testing::splitting_degrees(model.desc);
  ASSERT_FALSE(degrees.empty()) << "no degree in 2..4 splits " << GetParam();
  const auto requests = greedy_requests(f.expected["cases"], true);
  for (int degree : degrees) {
    for (size_t i = 0; i < requests.size(); ++i) {
      const json& c = f.expected["cases"][i];
      SCOPED_TRACE("degree " + std::to_string(degree) + ", prompt length " +
                   std::to_string(requests[i].prompt.size()));
      auto backend = backend_for(model, 1,
                                 int(requests[i].prompt.size()) + requests[i].params.max_new_tokens,
                                 degree);
      Generator gen(*backend);
      const GenerationResult r = gen.generate(std::span(&requests[i], 1)).front();
      EXPECT_EQ(r.tokens, c["greedy_ids"].get<std::vector<int32_t>>());
      testing::expect_case_logits_near(r, c, 1e-4);
    }
  }
}

TEST_P(HfParity, RaggedBatchMatchesEachPromptAlone) {
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  const auto requests = greedy_requests(f.expected["cases"], false);
  int longest = 0;
  for (const auto& r : requests) longest = std::max(longest, int(r.prompt.size()) + r.params.max_new_tokens);
  auto backend = backend_for(model, int(requests.size()), longest);
  Generator gen(*backend);
  const auto results = gen.generate(requests);
  ASSERT_EQ(results.size(), requests.size());
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_EQ(results[i].tokens, f.expected["cases"][i]["greedy_ids"].get<std::vector<int32_t>>())
        << "prompt " << i << " inside a batch of " << results.size();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfParity, ::testing::ValuesIn(parity_fixture_names()),
                         testing::ParityNamePrinter());

// Guards against an empty parameter list silently running nothing: every family must be covered.
TEST(HfParityCoverage, EveryArchitectureHasFixtures) {
  std::set<std::string> archs;
  for (const auto& name : parity_fixture_names()) archs.insert(open_parity_fixture(name).expected["architecture"]);
  for (const std::string& a : supported_architectures())
    EXPECT_TRUE(archs.count(a)) << "no parity fixture for " << a << " in " << testing::parity_dir();
}

// The tensor-parallel test above covers the splits that need care: some fixture runs at a degree
// above its KV head count (KV heads replicated) and at one that does not divide its vocabulary
// (the padded LM head shard), for every family at least one degree.
TEST(HfParityCoverage, TensorParallelSplitsThatNeedCare) {
  bool replicated_kv = false, padded_vocab = false;
  std::set<std::string> split_archs;
  for (const auto& name : parity_fixture_names()) {
    const LoadedModel model = load_model(open_parity_fixture(name).model_dir);
    for (int degree : testing::splitting_degrees(model.desc)) {
      split_archs.insert(model.desc.architecture);
      replicated_kv |= degree > model.desc.num_kv_heads;
      padded_vocab |= model.desc.vocab_size % degree != 0;
    }
  }
  EXPECT_TRUE(replicated_kv) << "no fixture has fewer KV heads than a degree that splits it";
  EXPECT_TRUE(padded_vocab) << "no fixture has a vocabulary that a splitting degree does not divide";
  for (const std::string& a : supported_architectures())
    EXPECT_TRUE(split_archs.count(a)) << "no fixture of " << a << " splits over 2..4 ranks";
}

}  // namespace
}  // namespace lmx
