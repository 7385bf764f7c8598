// One tensor-parallel rank's part of a model (docs/model-layer.md, "Shard spec"): the slice of
// the decoder it computes and its slices of the weights, from each Linear's ShardSpec.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/decoder_desc.h"
#include "engine/model/weight_map.h"

namespace lmx {

struct TensorParallelRank {
  int rank = 0, ranks = 1;
};

// The rank's decoder: num_heads / ranks query heads, kv_heads / ranks KV heads (one, replicated
// on ranks / kv_heads ranks, when the degree is a multiple of the KV head count: GQA / MQA) and
// intermediate_size / ranks; the rest as `d`. Throws lmx::Error naming the numbers when the
// degree does not divide the heads, the KV heads (nor is a multiple of them) or the
// intermediate size.
DecoderDesc rank_desc(const DecoderDesc& d, TensorParallelRank tp);

// Rows of the vocabulary-parallel LM head a rank holds: ceil(vocab / ranks); the last ranks pad
// with zero rows past the vocabulary (their logits are dropped when gathered).
int vocab_rows_per_rank(int vocab, int ranks);

// The vocabulary ids whose logits rank `tp.rank` computes: [first, first + cols), its first `cols`
// rows of vocab_rows_per_rank (cols < that on a rank that pads; on one wholly past the end, none:
// first = vocab, cols = 0).
struct VocabSlice {
  int first = 0, cols = 0;
};
VocabSlice rank_vocab_slice(int vocab, TensorParallelRank tp);

// The rank's part of the model's weights, as references that select its slices: column-parallel
// projections (qkv, gate/up) keep the rows of the rank's heads / intermediate slice, row-parallel
// ones (o, down) their columns, with the bias on rank 0 only (the all-reduce of the partial
// outputs adds it once); the LM head its vocabulary rows, padded with zero rows (a tied head takes
// them from the embedding); the embedding, positions, norms and OPT's projections whole. Every
// backend materializes them as it does the whole model's, reading only the rank's slices. One
// rank: `w` unchanged. Throws as rank_desc for a degree that does not split the model.
ModelWeightRefs shard_weights(const ModelWeightRefs& w, const DecoderDesc& d,
                              TensorParallelRank tp);

// What `lmx config`, /ping and stats() say of the split at `degree`: {"degree", "heads_per_rank",
// "kv_heads_per_rank", "kv_heads_replicated", "intermediate_per_rank", "vocab_rows_per_rank",
// "vocab_padding_rows", "projections": {name: how it is split}}. Throws as rank_desc.
nlohmann::json shard_plan(const DecoderDesc& d, int degree);

}  // namespace lmx
