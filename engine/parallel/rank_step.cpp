// Message layout, int32 words: [kind, chunk count, then per chunk: token count, start position,
// block count, compute_logits] then every chunk's tokens, then every chunk's block table; a draw
// step (kind kDraw) then has the row count and each row's SamplingRow bytes. Sent as a size
// broadcast (8 bytes) followed by the words. Every rank runs the same build, so the rows' bytes
// mean the same on every rank.
#include "engine/parallel/rank_step.h"

#include <cstring>
#include <type_traits>

#include "engine/core/error.h"

namespace lmx {
namespace {

enum Kind : int32_t { kForward = 1, kStop = 2, kDraw = 3 };
constexpr size_t kHeader = 2, kPerChunk = 4;
static_assert(std::is_trivially_copyable_v<kernels::SamplingRow> &&
              sizeof(kernels::SamplingRow) % sizeof(int32_t) == 0);
constexpr size_t kPerDraw = sizeof(kernels::SamplingRow) / sizeof(int32_t);

void broadcast_words(Communicator& comm, std::vector<int32_t>& words) {
  uint64_t count = words.size();
  comm.broadcast_bytes(&count, sizeof count, 0);
  words.resize(size_t(count));
  comm.broadcast_bytes(words.data(), words.size() * sizeof(int32_t), 0);
}

}  // namespace

void send_step(Communicator& comm, std::span<const BatchChunk> chunks,
               std::span<const kernels::SamplingRow> draws) {
  std::vector<int32_t> words = {draws.empty() ? kForward : kDraw, int32_t(chunks.size())};
  for (const BatchChunk& c : chunks)
    words.insert(words.end(), {int32_t(c.tokens.size()), c.start_position,
                               int32_t(c.block_table.size()), c.compute_logits ? 1 : 0});
  for (const BatchChunk& c : chunks) words.insert(words.end(), c.tokens.begin(), c.tokens.end());
  for (const BatchChunk& c : chunks)
    words.insert(words.end(), c.block_table.begin(), c.block_table.end());
  if (!draws.empty()) {
    const size_t at = words.size();
    words.push_back(int32_t(draws.size()));
    words.resize(at + 1 + draws.size() * kPerDraw);
    std::memcpy(words.data() + at + 1, draws.data(), draws.size() * sizeof(kernels::SamplingRow));
  }
  broadcast_words(comm, words);
}

void send_stop(Communicator& comm) {
  std::vector<int32_t> words = {kStop, 0};
  broadcast_words(comm, words);
}

std::optional<RankStep> receive_step(Communicator& comm) {
  RankStep step;
  broadcast_words(comm, step.words);
  const std::vector<int32_t>& w = step.words;
  if (w.size() < kHeader)
    throw_error("tensor-parallel step message of {} words is too short", w.size());
  if (w[0] == kStop) return std::nullopt;
  const size_t n = size_t(w[1]);
  if ((w[0] != kForward && w[0] != kDraw) || w.size() < kHeader + n * kPerChunk)
    throw_error("malformed tensor-parallel step message (kind {}, {} chunks, {} words)", w[0], n,
                w.size());
  size_t at = kHeader + n * kPerChunk;
  step.chunks.resize(n);
  for (int pass = 0; pass < 2; ++pass) {  // tokens, then block tables
    for (size_t i = 0; i < n; ++i) {
      const int32_t* h = w.data() + kHeader + i * kPerChunk;
      const size_t len = size_t(pass == 0 ? h[0] : h[2]);
      if (at + len > w.size()) throw_error("truncated tensor-parallel step message");
      const std::span<const int32_t> part(w.data() + at, len);
      if (pass == 0) {
        step.chunks[i].tokens = part;
        step.chunks[i].start_position = h[1];
        step.chunks[i].compute_logits = h[3] != 0;
      } else {
        step.chunks[i].block_table = part;
      }
      at += len;
    }
  }
  if (w[0] == kDraw) {
    const size_t rows = at < w.size() ? size_t(w[at]) : 0;
    if (rows == 0 || w.size() != at + 1 + rows * kPerDraw)
      throw_error("malformed tensor-parallel draw step ({} rows in {} words)", rows, w.size() - at);
    step.draws.resize(rows);
    std::memcpy(static_cast<void*>(step.draws.data()), w.data() + at + 1, rows * sizeof(kernels::SamplingRow));
  }
  return step;
}

}  // namespace lmx
