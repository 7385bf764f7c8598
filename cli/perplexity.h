// The scoring behind `lmx perplexity` (docs/quantization.md, "Perplexity protocol"):
//   1. the text is split into paragraphs at blank lines (lines of whitespace only); each
//      paragraph is its lines joined by "\n", stripped of surrounding ASCII whitespace (space,
//      \t \n \r \f \v); empty ones drop;
//   2. each paragraph is encoded with the tokenizer's default special tokens (BOS for Llama-family
//      tokenizers) and truncated to the model's context (max_position_embeddings);
//   3. the negative log-likelihood, natural log, of every predicted token (positions 1..n-1 of
//      each paragraph, from the fp32 logits of the position before) is summed in fp64:
//      nll = sum over predictions of (logsumexp(logits) - logits[target]); ppl = exp(nll / tokens).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/backend.h"

namespace lmx::cli {

std::vector<std::string> split_paragraphs(std::string_view text);

struct PerplexityResult {
  int64_t paragraphs = 0;
  int64_t tokens = 0;  // predicted tokens
  double nll = 0.0;
  double ppl() const;
};

// Scores each paragraph's ids (already encoded and truncated) in one forward of all its positions
// (BatchChunk::all_logits) on `backend`, whose KV cache must hold the longest paragraph; the cache
// is reused from position 0 for each. progress(done, total) is called after each paragraph.
// Throws lmx::Error when the backend cannot give every position's logits.
PerplexityResult score_paragraphs(Backend& backend, const std::vector<std::vector<int32_t>>& ids,
                                  const std::function<void(size_t, size_t)>& progress = {});

// -log softmax(logits)[target], in fp64: logits [vocab] fp32.
double token_nll(const float* logits, int vocab, int target);

}  // namespace lmx::cli
