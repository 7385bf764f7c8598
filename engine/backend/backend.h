// A backend runs the decoder over a ragged batch: several sequences, each contributing a chunk of
// new tokens (a whole prompt, part of one, or a single decode token), in one forward pass.
// KV storage is paged: the caller (generator / scheduler) owns block allocation and passes each
// sequence's block table.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generate/sampling.h"
#include "engine/model/decoder_desc.h"
#include "kernels/kv_dtype.h"

namespace lmx {

class SmoothingScorer;  // engine/backend/smoothing_scorer.h

struct BatchChunk {
  std::span<const int32_t> tokens;       // new tokens of this sequence
  int start_position = 0;                // position of tokens[0] = tokens already in the cache
  std::span<const int32_t> block_table;  // KV blocks covering start_position + tokens.size()
  bool compute_logits = true;            // logits of the chunk's last token
  // Logits of every token of the chunk instead (scoring a text: lmx perplexity); only on
  // backends whose supports_all_logits() is true, and not through forward_sample.
  bool all_logits = false;
};

// The draw for one logits row (the i-th chunk with compute_logits, in chunk order).
struct SampleSpec {
  kernels::SamplingRow params;
  std::span<const int32_t> history;  // ids the repetition penalty applies to (prompt + generated)
  bool return_logits = false;  // forward_sample also hands this row's logits back
};

struct KvCacheShape {
  int block_size = 16;  // tokens per block
  int num_blocks = 0;
  // How K and V are stored (option.kv_cache_dtype): the model's dtype, or fp8 E4M3, which the
  // CPU backend emulates by rounding each cached value (kernels/kv_dtype.h).
  kernels::KvDtype dtype = kernels::KvDtype::model;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const DecoderDesc& desc() const = 0;
  virtual const KvCacheShape& kv_shape() const = 0;
  virtual std::string name() const = 0;
  // How the KV cache stores values: "fp8_e4m3", or the compute dtype ("fp32", "fp16", "bf16").
  virtual std::string kv_cache_dtype_name() const = 0;
  // Ranks the model is split over (engine/parallel/rank_group.h); 1 when it runs whole.
  virtual int tensor_parallel_degree() const { return 1; }

  // Whether forward() honours BatchChunk::all_logits. Callers check it first: the CPU backend
  // (one rank) does; a backend without it may refuse the flag or ignore it.
  virtual bool supports_all_logits() const { return false; }

  // Runs the chunks, appending their K/V to the cache, and writes the logits of every chunk with
  // compute_logits (one row, its last token) or all_logits (one row a token), in chunk order:
  // logits is resized to [rows, vocab] fp32, host.
  virtual void forward(std::span<const BatchChunk> chunks, std::vector<float>& logits) = 0;

  // Runs the chunks as forward() does, for a tensor-parallel rank other than the leader: the same
  // work and collectives, without handing logits back (engine/parallel/rank_group.h).
  virtual void forward_discard(std::span<const BatchChunk> chunks) {
    std::vector<float> logits;
    forward(chunks, logits);
  }

  // Tensor-parallel ranks: whether the rank draws the rows that draw_without_gather
  // (engine/backend/sample_rows.h) from the ranks' own logits, gathering 20 bytes a row instead of
  // the logits. The rank group then sends those rows' parameters with the step, and the other
  // ranks run forward_sample_discard.
  virtual bool draws_sharded() const { return false; }

  // A rank other than the leader, for a step the leader runs by forward_sample with rows that
  // draw_without_gather: the same work and collectives, this rank's part of the draw. `rows`:
  // one per logits row. Only backends whose draws_sharded() is true.
  virtual void forward_sample_discard(std::span<const BatchChunk> chunks,
                                      std::span<const kernels::SamplingRow> rows);

  // Runs the chunks and draws one token per logits row (kernels/sampling.h: the same draw on
  // every backend), so only ids and log-probs leave the device. rows and out have one entry per
  // chunk with compute_logits. When `logits` is given it receives the logits of the rows whose
  // spec has return_logits, in their order: [those rows, vocab] fp32 (only they are copied off
  // the device). The default samples forward()'s host logits with the CPU kernel.
  virtual void forward_sample(std::span<const BatchChunk> chunks, std::span<const SampleSpec> rows,
                              std::span<SampledToken> out, std::vector<float>* logits = nullptr);

  // smoothquant's alpha search over the unquantized weights this backend holds (a backend made
  // with an ActivationObserver, one rank); null where the backend offers none. Owned by the
  // backend.
  virtual SmoothingScorer* smoothing_scorer() { return nullptr; }

  // Per-op time accumulated since the last call, when the backend was built to profile
  // ({"op": {"ms": total, "steps": n}}); empty otherwise. Resets the counters.
  virtual nlohmann::json take_profile() { return nlohmann::json::object(); }
};

}  // namespace lmx
