// The batch sizes CUDA graphs are captured for (engine/backend/cuda/cuda_backend.cpp): a decode
// step of n sequences replays the graph of the smallest bucket that holds n, its extra rows
// padding. Buckets grow by about a third past 64, so padding stays below ~33% of a step, up to
// 1024 sequences (option.max_rolling_batch_size's largest); the step's capacity (the backend's
// sequences and tokens a forward may carry) caps them, and is itself the last bucket, so every
// decode step the backend can take replays a graph.
#pragma once

#include <algorithm>
#include <array>

namespace lmx {

inline constexpr std::array<int, 18> kDecodeGraphBuckets = {
    1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 640, 768, 1024};

// The bucket for a decode step of `seqs` sequences (one token each) when a forward carries at most
// `capacity` of them: the smallest listed bucket >= seqs, or `capacity` when that is smaller or
// none is listed; 0 when seqs exceeds the capacity (no graph: the step is refused anyway).
constexpr int decode_graph_bucket(int seqs, int capacity) {
  if (seqs < 1 || seqs > capacity) return 0;
  for (int b : kDecodeGraphBuckets)
    if (b >= seqs) return std::min(b, capacity);
  return capacity;
}

}  // namespace lmx
