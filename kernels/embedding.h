// Embedding lookup: out[t, :] = table[ids[t], :] (+ positions_table[positions[t], :] when given).
// table: [vocab, hidden]; out: [tokens, hidden]. CPU: fp32, host. Ids must be < vocab (the
// engine validates request ids before they reach a kernel).
#pragma once

#include <cstdint>

namespace lmx::kernels::cpu {

void embedding(const int32_t* ids, const float* table, const int32_t* positions,
               const float* positions_table, float* out, int tokens, int hidden);

}  // namespace lmx::kernels::cpu
