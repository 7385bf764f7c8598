#include "engine/backend/sample_rows.h"

#include <algorithm>

#include "engine/core/error.h"
#include "kernels/sampling.h"

namespace lmx {

PackedSampleRows pack_sample_rows(std::span<const SampleSpec> rows) {
  PackedSampleRows p;
  p.params.reserve(rows.size());
  size_t stride = 0;
  for (const SampleSpec& r : rows) {
    p.params.push_back(r.params);
    if (r.params.repetition_penalty != 1.0f) stride = std::max(stride, r.history.size());
  }
  if (stride == 0) return p;
  p.prev_stride = int(stride);
  p.prev_ids.assign(rows.size() * stride, -1);
  p.prev_len.assign(rows.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].params.repetition_penalty == 1.0f) continue;
    std::copy(rows[i].history.begin(), rows[i].history.end(), p.prev_ids.begin() + i * stride);
    p.prev_len[i] = int32_t(rows[i].history.size());
  }
  return p;
}

bool draw_without_gather(std::span<const SampleSpec> rows, int vocab) {
  return !rows.empty() && std::all_of(rows.begin(), rows.end(), [&](const SampleSpec& r) {
    return !r.return_logits && kernels::shardable_draw(r.params, vocab);
  });
}

void check_sample_rows(size_t rows, size_t outputs, size_t logit_rows) {
  if (rows != outputs)
    throw_error("forward_sample: {} sampling rows but {} outputs", rows, outputs);
  if (rows != logit_rows)
    throw_error("forward_sample: {} sampling rows for {} logits rows", rows, logit_rows);
}

void refuse_all_logits(std::span<const BatchChunk> chunks) {
  for (const BatchChunk& c : chunks)
    if (c.all_logits) throw_error("forward_sample draws one token a chunk: all_logits is for forward()");
}

void Backend::forward_sample(std::span<const BatchChunk> chunks, std::span<const SampleSpec> rows,
                             std::span<SampledToken> out, std::vector<float>* logits) {
  std::vector<float> l;
  refuse_all_logits(chunks);
  forward(chunks, l);
  const size_t V = size_t(desc().vocab_size);
  check_sample_rows(rows.size(), out.size(), l.size() / V);
  const PackedSampleRows p = pack_sample_rows(rows);
  std::vector<int32_t> ids(rows.size());
  std::vector<float> logprobs(rows.size());
  kernels::cpu::sample(l.data(), int(rows.size()), int(V), p.params.data(),
                       p.has_history() ? p.prev_ids.data() : nullptr, p.prev_stride,
                       p.has_history() ? p.prev_len.data() : nullptr, ids.data(), logprobs.data());
  for (size_t i = 0; i < rows.size(); ++i) out[i] = {ids[i], logprobs[i]};
  if (!logits) return;
  logits->clear();
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].return_logits)
      logits->insert(logits->end(), l.begin() + long(i * V), l.begin() + long((i + 1) * V));
}

}  // namespace lmx

namespace lmx {

void Backend::forward_sample_discard(std::span<const BatchChunk>,
                                     std::span<const kernels::SamplingRow>) {
  throw_error("internal: the {} backend does not draw over sharded logits", name());
}

}  // namespace lmx
