// Token selection over a batch of logit rows: repetition penalty, then temperature, top-k and
// top-p (Hugging Face's processor order, as engine/generate/sampling.h), then a draw; or argmax
// after the penalty when greedy.
//
// logits: [n, vocab] fp32, read only. params: [n] SamplingRow. prev_ids: [n, prev_stride] int32,
// row r's first prev_len[r] entries are the ids the penalty applies to (prompt + generated; ids
// outside [0, vocab) are ignored, duplicates count once). prev_ids / prev_len may be null when no
// row has a penalty. out_ids: [n] int32; out_logprob: [n] fp32 = log_softmax(raw logits)[id].
//
// Semantics (both backends):
//   y = penalized logits (y < 0 ? y * p : y / p for ids in the row's history); greedy: argmax y,
//   lowest index on ties. Otherwise z = y / temperature; top-k keeps z >= the k-th largest z
//   (ties with it kept, as transformers); top-p keeps the highest z whose softmax mass (over the
//   top-k set) strictly above them is < top_p (at least one token); the draw is the Gumbel-max
//   trick: argmax over kept i of z_i - log(-log(u_i)), u_i = philox_uniform_at(seed, step, i)
//   (kernels/philox.h), which samples exactly softmax(z) restricted to the kept set. The draw is a
//   pure function of (logits, params, seed, step): replaying a step reproduces it.
// CPU: host memory, exact sorts. CUDA: device memory, one block per row, radix select for the
//   top-k / top-p thresholds (masses summed in 32.32 fixed point: deterministic), no allocation,
//   no synchronization; the history bitmap lives in shared memory (vocab / 8 bytes).
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace lmx::kernels {

struct SamplingRow {
  uint64_t seed = 0;
  uint64_t step = 0;  // e.g. the number of tokens generated so far: one fresh draw per step
  float temperature = 1.0f;         // > 0; unused when greedy
  float top_p = 1.0f;               // (0, 1]; 1 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  int32_t top_k = 0;                // 0 (or >= vocab) = off
  int32_t greedy = 1;               // nonzero: argmax after the penalty
};

// Draws over vocabulary-sharded logits (tensor parallelism), without gathering the rows: each
// rank reduces its own columns to one DrawPartial a row, the ranks' partials are gathered (20
// bytes a row and rank), and combine_draws picks the token. Only rows without top-k, top-p and
// repetition penalty draw this way (shardable_draw): greedy = the largest logit, else the largest
// Gumbel key z_i - log(-log(u_i)) with u_i drawn at the token's vocabulary id, so the token is the
// one sample() draws from the whole row (ties: the lowest id); the log-prob combines the ranks'
// log-sum-exps, equal to sample()'s within float rounding.
struct DrawPartial {
  float key;    // the best key of the rank's columns (-inf: none)
  int32_t id;   // its vocabulary id
  float logit;  // its raw logit
  float max;    // log-sum-exp of the rank's raw logits: max ...
  float sum;    // ... and sum exp(logit - max)
};
static_assert(sizeof(DrawPartial) == 5 * sizeof(float), "gathered as 5 floats a row");

inline bool shardable_draw(const SamplingRow& p, int vocab) {
  return (p.top_k <= 0 || p.top_k >= vocab) && p.top_p >= 1.0f && p.repetition_penalty == 1.0f;
}

}  // namespace lmx::kernels

namespace lmx::kernels::cpu {

void sample(const float* logits, int n, int vocab, const SamplingRow* params,
            const int32_t* prev_ids, int prev_stride, const int32_t* prev_len, int32_t* out_ids,
            float* out_logprob);

// For tests: the distribution a non-greedy row draws from (softmax of z over the kept set, 0
// elsewhere). probs: [vocab].
void sampling_probs(const float* logits, int vocab, const SamplingRow& params,
                    const int32_t* prev_ids, int prev_len, double* probs);

// A rank's part of a sharded draw. logits: [n, ld] fp32, the rank's columns; the first `cols` of
// each row are vocabulary ids [first_id, first_id + cols) (the rest is padding, not read).
// params: [n], every row shardable_draw. out: [n].
void draw_partials(const float* logits, int n, int ld, int cols, int first_id,
                   const SamplingRow* params, DrawPartial* out);
// The draw from every rank's partials: parts [ranks, n] (rank r's row i at r * n + i), ranks in
// vocabulary order. out_ids / out_logprob: [n].
void combine_draws(const DrawPartial* parts, int ranks, int n, int32_t* out_ids, float* out_logprob);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

void sample(const float* logits, int n, int vocab, const SamplingRow* params,
            const int32_t* prev_ids, int prev_stride, const int32_t* prev_len, int32_t* out_ids,
            float* out_logprob, cudaStream_t stream);

// The same as the CPU functions above, device memory.
void draw_partials(const float* logits, int n, int ld, int cols, int first_id,
                   const SamplingRow* params, DrawPartial* out, cudaStream_t stream);
void combine_draws(const DrawPartial* parts, int ranks, int n, int32_t* out_ids, float* out_logprob,
                   cudaStream_t stream);

}  // namespace lmx::kernels::cuda
