// Host-side packing of a step's sampling rows into the arrays kernels/sampling.h takes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/backend.h"

namespace lmx {

struct PackedSampleRows {
  std::vector<kernels::SamplingRow> params;  // [n]
  // Repetition-penalty histories, only when some row has a penalty (else empty):
  std::vector<int32_t> prev_ids;  // [n, prev_stride]
  std::vector<int32_t> prev_len;  // [n]; 0 for rows without a penalty
  int prev_stride = 0;

  bool has_history() const { return !prev_len.empty(); }
};

PackedSampleRows pack_sample_rows(std::span<const SampleSpec> rows);

// Whether a tensor-parallel group draws these rows from every rank's own logits instead of
// gathering them (kernels/sampling.h, DrawPartial): every row is shardable_draw and none wants its
// logits back. False for no rows.
bool draw_without_gather(std::span<const SampleSpec> rows, int vocab);

// forward_sample draws one token a chunk: a chunk asking for all_logits is refused (it is for
// forward()).
void refuse_all_logits(std::span<const BatchChunk> chunks);

// Throws unless a forward_sample call has one sampling row and one output per logits row.
void check_sample_rows(size_t rows, size_t outputs, size_t logit_rows);

}  // namespace lmx
