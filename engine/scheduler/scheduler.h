// Continuous batching over a paged KV cache (LMI's rolling batch, FastGen's Dynamic SplitFuse):
// every step() runs one forward in which requests join and leave.
//
// Per step, under a token budget (max_rolling_batch_prefill_tokens):
//  1. every running sequence that is generating gets its one decode token (oldest first); a
//     sequence that needs a new KV block and finds none preempts the newest running sequence
//     (its blocks are freed; it is recomputed from its prompt + generated tokens later);
//  2. sequences part-way through a prompt get their next chunk;
//  3. waiting requests are admitted first come, first served while fewer than max_running run,
//     budget is left and KV blocks can be had; the first one that does not fit holds the rest
//     (no starvation by smaller late-comers).
// Single-threaded: the owner (Generator, Engine worker) calls everything from one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/block_allocator.h"
#include "engine/generate/finish_reason.h"
#include "engine/generate/generation_params.h"
#include "engine/generate/sampling.h"

namespace lmx {

struct SchedulerLimits {
  int max_running = 256;       // max_rolling_batch_size
  int max_step_tokens = 4096;  // max_rolling_batch_prefill_tokens: tokens in one forward
};

struct SchedulerRequest {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  GenerationParams params;
};

struct TokenOutput {
  uint64_t id = 0;
  SampledToken token;
  bool finished = false;  // eos / stop token / max_new_tokens; the sequence is already released
  FinishReason reason = FinishReason::Length;
  std::vector<float> prompt_logits;  // with the first token, when the request asked for them
  std::vector<float> step_logits;    // with tokens 1..return_step_logits, when asked for
  std::vector<SampledToken> top;     // the draw's most likely tokens (GenerationParams::top_logprobs)
  std::string error;  // reason Error: the request failed alone (e.g. its logits were not finite)
};

struct SchedulerStats {
  int running = 0;
  int waiting = 0;
  int kv_blocks_used = 0;
  int kv_blocks_free = 0;
  long preemptions = 0;
};

// What one step() fed the model: one token of each decoding sequence, and prompt tokens (new
// prompts, chunks of long ones, recomputation after preemption).
struct StepComposition {
  int decode_tokens = 0;
  int prompt_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(Backend& backend, SchedulerLimits limits);
  ~Scheduler();

  // Throws RequestError when the request can never run: empty prompt, ids outside the
  // vocabulary, prompt + max_new_tokens beyond the model's positions or the whole KV cache.
  void validate(const SchedulerRequest& request) const;
  void add(SchedulerRequest request);  // validates
  bool remove(uint64_t id);            // cancel or stop: frees the KV blocks now
  bool contains(uint64_t id) const;

  std::vector<TokenOutput> step();
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  SchedulerStats stats() const;
  StepComposition last_step() const { return last_step_; }

 private:
  struct Sequence;
  using SequencePtr = std::unique_ptr<Sequence>;

  bool reserve(Sequence& seq, int tokens);  // KV blocks for `tokens` positions, preempting
  void preempt_newest();
  // Appends each drawn token to its sequence and decides whether it finished.
  std::vector<TokenOutput> finish(const std::vector<Sequence*>& with_logits,
                                  std::span<const SampledToken> tokens,
                                  std::span<const float> logits);

  Backend& backend_;
  SchedulerLimits limits_;
  BlockAllocator blocks_;
  std::vector<SequencePtr> running_;  // in arrival order
  std::deque<SequencePtr> waiting_;   // preempted sequences go back to the front
  long preemptions_ = 0;
  StepComposition last_step_;
  uint64_t arrivals_ = 0;
  std::mt19937_64 seeds_{std::random_device{}()};  // for requests without a seed
};

}  // namespace lmx
