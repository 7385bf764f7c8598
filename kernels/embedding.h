// Embedding lookup: out[t, :] = table[ids[t], :] (+ positions_table[positions[t], :] when given).
// table: [vocab, hidden]; out: [tokens, hidden]. CPU: fp32, host. Ids must be < vocab (the
// engine validates request ids before they reach a kernel).
// CUDA: T = float, __half or __nv_bfloat16; ids, positions: [tokens] int32 device arrays (so a
// decode step can be replayed from a CUDA graph); positions / positions_table may be null (no
// learned positions). Sum in fp32, one rounding. 16-byte loads when hidden and the pointers allow.
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace lmx::kernels::cpu {

void embedding(const int32_t* ids, const float* table, const int32_t* positions,
               const float* positions_table, float* out, int tokens, int hidden);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

template <typename T>
void embedding(const int32_t* ids, const T* table, const int32_t* positions,
               const T* positions_table, T* out, int tokens, int hidden, cudaStream_t stream);

}  // namespace lmx::kernels::cuda
