#include "engine/generate/generator.h"

#include <algorithm>

#include "engine/backend/block_allocator.h"
#include "engine/core/error.h"

namespace lmx {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Length: return "length";
    case FinishReason::EosToken: return "eos_token";
    case FinishReason::StopSequence: return "stop_sequence";
  }
  return "length";
}

namespace {

struct Sequence {
  const GenerationRequest* request;
  GenerationResult result;
  Sampler sampler;
  std::vector<int32_t> context;  // prompt + generated
  std::vector<int32_t> blocks;
  bool done = false;
};

void validate(const GenerationRequest& r, const DecoderDesc& desc, size_t index) {
  if (r.prompt.empty()) throw_error("request {}: the prompt is empty", index);
  for (int32_t id : r.prompt)
    if (id < 0 || id >= desc.vocab_size)
      throw_error("request {}: prompt token id {} is outside the vocabulary [0, {})", index, id,
                  desc.vocab_size);
  if (r.params.max_new_tokens < 1)
    throw_error("request {}: max_new_tokens must be >= 1, got {}", index, r.params.max_new_tokens);
  const long total = long(r.prompt.size()) + r.params.max_new_tokens;
  if (total > desc.max_position_embeddings)
    throw_error("request {}: prompt ({} tokens) + max_new_tokens ({}) = {} exceeds the model's "
                "{} positions", index, r.prompt.size(), r.params.max_new_tokens, total,
                desc.max_position_embeddings);
  r.params.sampling.validate();
}

bool stops(const Sequence& s, int32_t token, const DecoderDesc& desc, FinishReason& why) {
  const auto& p = s.request->params;
  if (!p.ignore_eos && std::count(desc.eos_token_ids.begin(), desc.eos_token_ids.end(), token)) {
    why = FinishReason::EosToken;
    return true;
  }
  if (std::count(p.stop_token_ids.begin(), p.stop_token_ids.end(), token)) {
    why = FinishReason::StopSequence;
    return true;
  }
  return false;
}

}  // namespace

std::vector<GenerationResult> Generator::generate(std::span<const GenerationRequest> requests) {
  const DecoderDesc& desc = backend_.desc();
  const KvCacheShape& kv = backend_.kv_shape();
  for (size_t i = 0; i < requests.size(); ++i) validate(requests[i], desc, i);

  BlockAllocator blocks(kv.num_blocks);
  std::vector<Sequence> seqs;
  seqs.reserve(requests.size());
  for (const GenerationRequest& r : requests) {
    Sequence s{&r, {}, Sampler(r.params.sampling), r.prompt, {}, false};
    const int capacity = int(r.prompt.size()) + r.params.max_new_tokens;
    if (!blocks.ensure(s.blocks, capacity, kv.block_size))
      throw_error("the KV cache ({} blocks of {} tokens) cannot hold this batch: {} more tokens "
                  "needed for request {}", kv.num_blocks, kv.block_size, capacity, seqs.size());
    seqs.push_back(std::move(s));
  }

  std::vector<BatchChunk> chunks;
  std::vector<Sequence*> active;
  std::vector<float> logits;
  const size_t V = size_t(desc.vocab_size);
  bool prefill = true;
  for (;;) {
    chunks.clear();
    active.clear();
    for (Sequence& s : seqs) {
      if (s.done) continue;
      const size_t cached = prefill ? 0 : s.context.size() - 1;
      chunks.push_back({std::span(s.context).subspan(cached), int(cached), s.blocks, true});
      active.push_back(&s);
    }
    if (active.empty()) break;
    backend_.forward(chunks, logits);
    for (size_t i = 0; i < active.size(); ++i) {
      Sequence& s = *active[i];
      std::span<float> row(logits.data() + i * V, V);
      if (prefill && s.request->params.return_prompt_logits)
        s.result.prompt_logits.assign(row.begin(), row.end());
      const SampledToken t = s.sampler.sample(row, s.context);
      s.context.push_back(t.id);
      s.result.tokens.push_back(t.id);
      s.result.logprobs.push_back(t.logprob);
      FinishReason why = FinishReason::Length;
      if (stops(s, t.id, desc, why) ||
          int(s.result.tokens.size()) >= s.request->params.max_new_tokens) {
        s.result.finish = why;
        s.done = true;
      }
    }
    prefill = false;
  }

  std::vector<GenerationResult> results;
  for (Sequence& s : seqs) results.push_back(std::move(s.result));
  return results;
}

}  // namespace lmx
