// A rank's weights (engine/model/shard.h) read slice-wise from the checkpoint equal the same
// slices cut out of the whole materialized weight, for every storage the loader reorders (GPT-2's
// transposed Conv1D, NeoX/Bloom's per-head fused q/k/v, GPT-J's interleaved rotary rows), with
// KV heads replicated past their count and the tied LM head padded where the vocabulary does not
// divide. A load in chunks of rows (materialize_rows_f32, and copy_rows_as_stored, which copies
// 16-bit / fp32 weights without converting them) gives the same values.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/model/model.h"
#include "engine/model/shard.h"
#include "engine/model/weight_map.h"
#include "engine/core/dtype.h"

namespace lmx {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;
using Matrix = std::vector<float>;

Matrix rows_of(const Matrix& whole, const Ranges& ranges, int64_t cols, int64_t padded_rows) {
  Matrix out;
  for (auto [b, e] : ranges)
    out.insert(out.end(), whole.begin() + b * cols, whole.begin() + e * cols);
  out.resize(size_t(padded_rows * cols), 0.0f);
  return out;
}

Matrix cols_of(const Matrix& whole, const Ranges& ranges, int64_t rows, int64_t cols) {
  Matrix out;
  for (int64_t r = 0; r < rows; ++r)
    for (auto [b, e] : ranges)
      out.insert(out.end(), whole.begin() + r * cols + b, whole.begin() + r * cols + e);
  return out;
}

Matrix get(const WeightRef& ref) { return ref.present() ? materialize_f32(ref) : Matrix{}; }

void expect_rank_slices(const std::string& fixture, int degree) {
  SCOPED_TRACE(fixture + " at degree " + std::to_string(degree));
  const LoadedModel m = load_model(std::string(LMX_FIXTURES_DIR) + "/parity/" + fixture);
  const ModelWeightRefs& w = m.weights;
  for (int rank = 0; rank < degree; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const ModelWeightRefs s = shard_weights(w, m.desc, {rank, degree});
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const LayerWeightRefs &whole = w.layers[l], &part = s.layers[l];
      for (const auto* pair : {&whole.qkv, &whole.up}) {
        const LinearRef& full = *pair;
        const LinearRef& mine = pair == &whole.qkv ? part.qkv : part.up;
        const Ranges rows = shard_ranges(full.shard, full.out, rank, degree);
        EXPECT_EQ(get(mine.weight), rows_of(get(full.weight), rows, full.in, mine.out));
        EXPECT_EQ(get(mine.bias),
                  full.has_bias() ? rows_of(get(full.bias), rows, 1, mine.out) : Matrix{});
      }
      for (const auto* pair : {&whole.o, &whole.down}) {
        const LinearRef& full = *pair;
        const LinearRef& mine = pair == &whole.o ? part.o : part.down;
        const Ranges cols = shard_ranges(full.shard, full.in, rank, degree);
        EXPECT_EQ(get(mine.weight), cols_of(get(full.weight), cols, full.out, full.in));
        EXPECT_EQ(get(mine.bias), rank == 0 ? get(full.bias) : Matrix{});
      }
    }
    const WeightRef& head = w.lm_head_tied ? w.embed : w.lm_head.weight;
    const int64_t per = vocab_rows_per_rank(m.desc.vocab_size, degree);
    const Ranges vocab = shard_ranges(w.lm_head.shard, w.lm_head.out, rank, degree);
    EXPECT_FALSE(s.lm_head_tied);
    EXPECT_EQ(s.lm_head.out, per);
    EXPECT_EQ(get(s.lm_head.weight), rows_of(get(head), vocab, w.lm_head.in, per));
    EXPECT_EQ(get(s.embed), get(w.embed));  // the embedding stays whole
  }
}

TEST(ShardWeights, TransposedConv1D) { expect_rank_slices("gpt2", 2); }
TEST(ShardWeights, PerHeadFusedQkv) {
  expect_rank_slices("gpt_neox_parallel", 2);
  expect_rank_slices("gpt_neox_parallel", 4);
}
TEST(ShardWeights, InterleavedRotaryRows) { expect_rank_slices("gptj_partial_rotary", 2); }
TEST(ShardWeights, TiedHeadPaddedVocabulary) { expect_rank_slices("bloom_6heads_bf16", 3); }
TEST(ShardWeights, ReplicatedKvHeads) {
  expect_rank_slices("llama_mqa_bf16_sharded", 4);
  expect_rank_slices("llama_gqa_llama3_bias", 4);
}

// Each rank's vocabulary ids: ceil(vocab / ranks) a rank, the last ones short or empty.
TEST(ShardWeights, RankVocabSlices) {
  auto slices = [](int vocab, int ranks) {
    std::vector<std::pair<int, int>> out;
    for (int r = 0; r < ranks; ++r) {
      const VocabSlice s = rank_vocab_slice(vocab, {r, ranks});
      out.emplace_back(s.first, s.cols);
    }
    return out;
  };
  using Slices = std::vector<std::pair<int, int>>;
  EXPECT_EQ(slices(12, 4), (Slices{{0, 3}, {3, 3}, {6, 3}, {9, 3}}));
  EXPECT_EQ(slices(10, 4), (Slices{{0, 3}, {3, 3}, {6, 3}, {9, 1}}));
  EXPECT_EQ(slices(5, 4), (Slices{{0, 2}, {2, 2}, {4, 1}, {5, 0}}));
  EXPECT_EQ(slices(7, 1), (Slices{{0, 7}}));
}

// One rank: the model's own references, untouched.
TEST(ShardWeights, OneRankIsTheWholeModel) {
  const LoadedModel m = load_model(std::string(LMX_FIXTURES_DIR) + "/parity/llama_mha_tied");
  const ModelWeightRefs s = shard_weights(m.weights, m.desc, {0, 1});
  EXPECT_TRUE(s.lm_head_tied);
  EXPECT_EQ(get(s.layers[0].qkv.weight), get(m.weights.layers[0].qkv.weight));
}

// Every weight a rank reads, in chunks of `chunk` rows: as fp32 (materialize_rows_f32) and, where
// the checkpoint stores it untransposed, as stored (copy_rows_as_stored), equal to the whole
// weight's materialize_f32 (the stored values convert exactly); another dtype copies nothing.
void expect_chunked_reads(const std::string& fixture, int degree, int64_t chunk) {
  SCOPED_TRACE(fixture + " at degree " + std::to_string(degree));
  const LoadedModel m = load_model(std::string(LMX_FIXTURES_DIR) + "/parity/" + fixture);
  for (int rank = 0; rank < degree; ++rank) {
    const ModelWeightRefs s = shard_weights(m.weights, m.desc, {rank, degree});
    std::vector<const WeightRef*> refs = {&s.embed, &s.lm_head.weight};
    for (const LayerWeightRefs& l : s.layers)
      for (const LinearRef* L : {&l.qkv, &l.o, &l.up, &l.down}) refs.insert(refs.end(), {&L->weight, &L->bias});
    int copied = 0;
    for (const WeightRef* ref : refs) {
      if (!ref->present()) continue;
      SCOPED_TRACE(ref->name + ", rank " + std::to_string(rank));
      const Matrix whole = materialize_f32(*ref);
      const int64_t rows = ref->shape[0], cols = ref->shape.size() == 2 ? ref->shape[1] : 1;
      Matrix chunked(whole.size()), as_stored;
      const DType stored = ref->parts[0]->dtype;
      const size_t elem = dtype_size(stored);
      std::vector<std::byte> bytes(size_t(chunk * cols) * elem);
      bool copies = true;
      for (int64_t b = 0; b < rows; b += chunk) {
        const int64_t e = std::min(rows, b + chunk);
        materialize_rows_f32(*ref, b, e, chunked.data() + b * cols);
        copies = copy_rows_as_stored(*ref, stored, b, e, bytes.data()) && copies;
        if (!copies) continue;
        std::vector<float> values(size_t((e - b) * cols));
        convert_to_f32(stored, bytes.data(), values.size(), values.data());
        as_stored.insert(as_stored.end(), values.begin(), values.end());
      }
      EXPECT_EQ(chunked, whole);
      EXPECT_EQ(copies, !ref->transposed);
      if (copies) {
        EXPECT_EQ(as_stored, whole);
        ++copied;
      }
      const DType other = stored == DType::F32 ? DType::F16 : DType::F32;
      EXPECT_FALSE(copy_rows_as_stored(*ref, other, 0, 1, bytes.data())) << "copied as another dtype";
    }
    EXPECT_GT(copied, 0);
  }
}

TEST(ChunkedWeightReads, EqualTheWholeWeightInEveryStorage) {
  expect_chunked_reads("gpt2", 2, 5);                             // F32, transposed Conv1D
  expect_chunked_reads("gpt_neox_full_rotary_nobias_f16", 2, 3);  // F16, per-head fused q/k/v
  expect_chunked_reads("bloom_6heads_bf16", 3, 7);                // BF16, padded vocabulary
  expect_chunked_reads("gptj_partial_rotary", 2, 4);              // interleaved rotary rows
  expect_chunked_reads("mistral_sliding", 1, 1000);               // F16, one chunk
}

}  // namespace
}  // namespace lmx
