#include "engine/scheduler/scheduler.h"

#include <cmath>

#include <fmt/format.h>

#include <algorithm>

#include "engine/core/error.h"
#include "engine/generate/constrained_draw.h"
#include "engine/generate/top_logprobs.h"

namespace lmx {

struct Scheduler::Sequence {
  SchedulerRequest request;
  uint64_t seed = 0;            // the request's, or one the scheduler picked
  std::vector<int32_t> tokens;  // prompt + generated
  std::vector<int32_t> blocks;  // KV block table
  int cached = 0;               // leading tokens whose K/V are in the cache
  int generated = 0;
  uint64_t arrival = 0;

  int pending() const { return int(tokens.size()) - cached; }
  bool decoding() const { return generated > 0 && pending() == 1; }
  // Whether the next draw returns its logits (GenerationParams::return_*_logits).
  bool returns_logits() const {
    const GenerationParams& p = request.params;
    return generated == 0 ? p.return_prompt_logits : generated <= p.return_step_logits;
  }
  // Whether the next draw needs its logits row on the host (returned, its alternatives, or a
  // constraint's redraw).
  bool wants_logits() const {
    return returns_logits() || request.params.top_logprobs > 0 || request.params.constraint;
  }
};

Scheduler::Scheduler(Backend& backend, SchedulerLimits limits)
    : backend_(backend), limits_(limits), blocks_(backend.kv_shape().num_blocks) {
  if (limits_.max_running < 1) throw_error("max_rolling_batch_size must be >= 1");
  if (limits_.max_step_tokens < 1) throw_error("max_rolling_batch_prefill_tokens must be >= 1");
}

Scheduler::~Scheduler() = default;

void Scheduler::validate(const SchedulerRequest& r) const {
  const DecoderDesc& desc = backend_.desc();
  if (r.prompt.empty()) throw RequestError("inputs", "the prompt is empty");
  for (int32_t id : r.prompt)
    if (id < 0 || id >= desc.vocab_size)
      throw RequestError("inputs", fmt::format("prompt token id {} is outside the vocabulary "
                                               "[0, {})", id, desc.vocab_size));
  if (r.params.max_new_tokens < 1)
    throw RequestError("parameters.max_new_tokens",
                       fmt::format("max_new_tokens must be >= 1, got {}", r.params.max_new_tokens));
  r.params.sampling.validate();
  const long total = long(r.prompt.size()) + r.params.max_new_tokens;
  if (total > desc.max_position_embeddings)
    throw RequestError("parameters.max_new_tokens",
                       fmt::format("prompt ({} tokens) + max_new_tokens ({}) = {} exceeds the "
                                   "model's {} positions", r.prompt.size(),
                                   r.params.max_new_tokens, total, desc.max_position_embeddings));
  const KvCacheShape& kv = backend_.kv_shape();
  const long capacity = long(kv.num_blocks) * kv.block_size;
  if (total > capacity)
    throw RequestError("parameters.max_new_tokens",
                       fmt::format("prompt ({} tokens) + max_new_tokens ({}) = {} exceeds the KV "
                                   "cache ({} tokens)", r.prompt.size(), r.params.max_new_tokens,
                                   total, capacity));
}

void Scheduler::add(SchedulerRequest request) {
  validate(request);
  const std::optional<uint64_t>& given = request.params.sampling.seed;
  const uint64_t seed = given ? *given : seeds_();  // draws from seeds_ only when needed
  auto seq = std::make_unique<Sequence>(
      Sequence{std::move(request), seed, {}, {}, 0, 0, arrivals_++});
  seq->tokens = seq->request.prompt;
  waiting_.push_back(std::move(seq));
}

bool Scheduler::remove(uint64_t id) {
  auto match = [id](const SequencePtr& s) { return s->request.id == id; };
  if (auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) {
    blocks_.release((*it)->blocks);
    running_.erase(it);
    return true;
  }
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), match); it != waiting_.end()) {
    blocks_.release((*it)->blocks);
    waiting_.erase(it);
    return true;
  }
  return false;
}

bool Scheduler::contains(uint64_t id) const {
  auto match = [id](const SequencePtr& s) { return s->request.id == id; };
  return std::any_of(running_.begin(), running_.end(), match) ||
         std::any_of(waiting_.begin(), waiting_.end(), match);
}

void Scheduler::preempt_newest() {
  SequencePtr victim = std::move(running_.back());
  running_.pop_back();
  blocks_.release(victim->blocks);
  victim->cached = 0;  // recomputed from prompt + generated tokens when readmitted
  ++preemptions_;
  // Keep the waiting queue in arrival order so preempted work resumes before newer requests.
  auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                          [&](const SequencePtr& s) { return s->arrival > victim->arrival; });
  waiting_.insert(pos, std::move(victim));
}

bool Scheduler::reserve(Sequence& seq, int tokens) {
  const int block_size = backend_.kv_shape().block_size;
  while (!blocks_.ensure(seq.blocks, tokens, block_size)) {
    if (running_.empty() || running_.back().get() == &seq) return false;
    preempt_newest();
  }
  return true;
}

std::vector<TokenOutput> Scheduler::step() {
  last_step_ = {};
  std::vector<BatchChunk> chunks;
  std::vector<std::pair<Sequence*, int>> planned;  // sequence, tokens it feeds this step
  std::vector<Sequence*> with_logits;
  int budget = limits_.max_step_tokens;
  auto schedule = [&](Sequence& s, int n) {
    const bool completes = s.cached + n == int(s.tokens.size());
    chunks.push_back({std::span(s.tokens).subspan(size_t(s.cached), size_t(n)), s.cached,
                      s.blocks, completes});
    planned.emplace_back(&s, n);
    if (completes) with_logits.push_back(&s);
    budget -= n;
  };

  // 1. Decode tokens, oldest first. A sequence that cannot get a block is preempted itself when
  //    it is the newest; otherwise newer ones make room for it.
  for (size_t i = 0; i < running_.size();) {
    Sequence& s = *running_[i];
    if (!s.decoding()) {
      ++i;
      continue;
    }
    if (!reserve(s, s.cached + 1)) {
      preempt_newest();  // s itself is the newest running sequence
      continue;
    }
    schedule(s, 1);
    ++i;
  }
  // 2. Running sequences part-way through their prompt (or recompute) continue.
  for (auto& sp : running_) {
    Sequence& s = *sp;
    if (s.decoding() || budget <= 0) continue;
    const int n = std::min(s.pending(), budget);
    if (!blocks_.ensure(s.blocks, s.cached + n, backend_.kv_shape().block_size)) continue;
    schedule(s, n);
  }
  // 3. Admission, first come first served.
  while (!waiting_.empty() && int(running_.size()) < limits_.max_running && budget > 0) {
    Sequence& s = *waiting_.front();
    const int n = std::min(s.pending(), budget);
    if (!blocks_.ensure(s.blocks, s.cached + n, backend_.kv_shape().block_size)) break;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    schedule(s, n);
  }
  if (chunks.empty()) {
    // Running prompts hold blocks but none can grow: free the newest and try again.
    if (running_.empty()) return {};
    preempt_newest();
    return step();
  }

  // One draw per sequence that completed its pending tokens: draw number `generated` of its seed.
  std::vector<SampleSpec> specs;
  bool want_logits = false;
  for (Sequence* s : with_logits) {
    const GenerationParams& p = s->request.params;
    specs.push_back({p.sampling.row(s->seed, uint64_t(s->generated)), s->tokens, s->wants_logits()});
    want_logits |= s->wants_logits();
  }
  std::vector<SampledToken> tokens(specs.size());
  std::vector<float> logits;
  for (auto [seq, n] : planned)
    (seq->decoding() ? last_step_.decode_tokens : last_step_.prompt_tokens) += n;
  backend_.forward_sample(chunks, specs, tokens, want_logits ? &logits : nullptr);
  for (auto [seq, n] : planned) seq->cached += n;
  return finish(with_logits, tokens, logits);
}

std::vector<TokenOutput> Scheduler::finish(const std::vector<Sequence*>& with_logits,
                                           std::span<const SampledToken> tokens,
                                           std::span<const float> logits) {
  const DecoderDesc& desc = backend_.desc();
  const size_t V = size_t(desc.vocab_size);
  std::vector<TokenOutput> outputs(with_logits.size());
  size_t returned = 0;  // logits holds the rows of the sequences that wanted them, in order
  std::vector<uint8_t> mask;  // constrained sequences' allowed tokens
  for (size_t i = 0; i < with_logits.size(); ++i) {
    Sequence& s = *with_logits[i];
    const GenerationParams& p = s.request.params;
    TokenOutput& out = outputs[i];
    out.id = s.request.id;
    const std::span<const float> row =
        s.wants_logits() ? logits.subspan(V * returned++, V) : std::span<const float>();
    if (s.returns_logits())
      (s.generated == 0 ? out.prompt_logits : out.step_logits).assign(row.begin(), row.end());
    if (p.top_logprobs > 0) out.top = top_logprobs(row, p.top_logprobs);
    out.token = tokens[i];
    // A row whose logits are not finite (NaN or infinite: its log-softmax is not) fails this
    // request alone; its neighbours in the batch go on.
    if (!std::isfinite(out.token.logprob)) {
      out.finished = true, out.reason = FinishReason::Error;
      out.error = fmt::format("the model's logits for this request were not finite at generated "
                              "token {} (NaN or infinity); the request was stopped",
                              s.generated + 1);
      continue;
    }
    // A constrained sequence draws again on the host, among the tokens its constraint allows,
    // with the same parameters, seed and step.
    if (p.constraint) {
      mask.resize(V);
      p.constraint->allowed(mask);
      const auto drawn =
          constrained_draw(row, mask, p.sampling.row(s.seed, uint64_t(s.generated)), s.tokens);
      if (!drawn || !p.constraint->accept(drawn->id)) {
        out.finished = true, out.reason = FinishReason::Error;
        out.error = fmt::format("the output constraint (tool_choice) allows no token at "
                                "generated token {}", s.generated + 1);
        continue;
      }
      out.token = *drawn;
    }
    s.tokens.push_back(out.token.id);
    ++s.generated;
    if (p.constraint && p.constraint->complete()) {  // the constrained text is whole: stop there
      out.finished = true, out.reason = FinishReason::StopSequence;
      continue;
    }
    const auto in = [&](const auto& list) {
      return std::find(list.begin(), list.end(), out.token.id) != list.end();
    };
    if (!p.ignore_eos && in(desc.eos_token_ids)) {
      out.finished = true, out.reason = FinishReason::EosToken;
    } else if (in(p.stop_token_ids)) {
      out.finished = true, out.reason = FinishReason::StopSequence;
    } else if (s.generated >= p.max_new_tokens) {
      out.finished = true, out.reason = FinishReason::Length;
    }
  }
  for (const TokenOutput& out : outputs)
    if (out.finished) remove(out.id);
  return outputs;
}

SchedulerStats Scheduler::stats() const {
  return {int(running_.size()), int(waiting_.size()),
          blocks_.total_blocks() - blocks_.free_blocks(), blocks_.free_blocks(), preemptions_};
}

}  // namespace lmx
