#include "kernels/embedding.h"

#include <cstddef>

namespace lmx::kernels::cpu {

void embedding(const int32_t* ids, const float* table, const int32_t* positions,
               const float* positions_table, float* out, int tokens, int hidden) {
  for (int t = 0; t < tokens; ++t) {
    const float* row = table + size_t(ids[t]) * hidden;
    float* o = out + size_t(t) * hidden;
    for (int c = 0; c < hidden; ++c) o[c] = row[c];
    if (!positions_table) continue;
    const float* prow = positions_table + size_t(positions[t]) * hidden;
    for (int c = 0; c < hidden; ++c) o[c] += prow[c];
  }
}

}  // namespace lmx::kernels::cpu
