// The tensor-parallel degrees in [2, max_degree] that split a model (engine/model/shard.h
// rank_desc accepts them: heads, KV heads or their replication, MLP rows), in increasing order.
#pragma once

#include <vector>

#include "engine/core/error.h"
#include "engine/model/decoder_desc.h"
#include "engine/model/shard.h"

namespace lmx::testing {

inline std::vector<int> splitting_degrees(const DecoderDesc& d, int max_degree = 4) {
  std::vector<int> degrees;
  for (int n = 2; n <= max_degree; ++n) {
    try {
      rank_desc(d, {0, n});
      degrees.push_back(n);
    } catch (const Error&) {
    }
  }
  return degrees;
}

}  // namespace lmx::testing
