#include "perplexity.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace lmx::cli {
namespace {

constexpr std::string_view kSpace = " \t\n\r\f\v";

std::string_view strip(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

}  // namespace

std::vector<std::string> split_paragraphs(std::string_view text) {
  std::vector<std::string> out;
  std::string current;
  bool open = false;  // current holds at least one line
  const auto close = [&] {
    const std::string_view p = strip(current);
    if (!p.empty()) out.emplace_back(p);
    current.clear();
    open = false;
  };
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = text.substr(start, end - start);
    if (strip(line).empty()) {
      close();
    } else {
      if (open) current += '\n';
      current += line;
      open = true;
    }
    start = end + 1;
  }
  close();
  return out;
}

double PerplexityResult::ppl() const { return std::exp(nll / double(tokens)); }

double token_nll(const float* logits, int vocab, int target) {
  double max = logits[0];
  for (int v = 1; v < vocab; ++v) max = std::max(max, double(logits[v]));
  double sum = 0.0;
  for (int v = 0; v < vocab; ++v) sum += std::exp(double(logits[v]) - max);
  return max + std::log(sum) - double(logits[target]);
}

PerplexityResult score_paragraphs(Backend& backend, const std::vector<std::vector<int32_t>>& ids,
                                  const std::function<void(size_t, size_t)>& progress) {
  if (!backend.supports_all_logits())
    throw_error("the {} backend cannot return every position's logits (BatchChunk::all_logits: not on a tensor-parallel rank), "
                "which perplexity needs; use --device cpu",
                backend.name());
  const KvCacheShape& kv = backend.kv_shape();
  std::vector<int32_t> table(size_t(kv.num_blocks));
  for (int b = 0; b < kv.num_blocks; ++b) table[size_t(b)] = b;
  const int V = backend.desc().vocab_size;
  PerplexityResult r;
  std::vector<float> logits;
  for (size_t p = 0; p < ids.size(); ++p) {
    ++r.paragraphs;
    const std::vector<int32_t>& t = ids[p];
    if (t.size() >= 2) {
      const size_t blocks = (t.size() + size_t(kv.block_size) - 1) / size_t(kv.block_size);
      if (blocks > table.size())
        throw_error("paragraph {} has {} tokens; the KV cache holds {}", p + 1, t.size(),
                    table.size() * size_t(kv.block_size));
      BatchChunk chunk;
      chunk.tokens = t;
      chunk.block_table = std::span<const int32_t>(table.data(), blocks);
      chunk.all_logits = true;
      backend.forward(std::span(&chunk, 1), logits);  // [t.size(), V]
      if (logits.size() != t.size() * size_t(V))
        throw_error("the {} backend returned {} logits rows for {} positions", backend.name(),
                    logits.size() / size_t(V), t.size());
      for (size_t i = 0; i + 1 < t.size(); ++i)  // row i predicts token i + 1
        r.nll += token_nll(logits.data() + i * size_t(V), V, t[i + 1]);
      r.tokens += int64_t(t.size()) - 1;
    }
    if (progress) progress(p + 1, ids.size());
  }
  return r;
}

}  // namespace lmx::cli
