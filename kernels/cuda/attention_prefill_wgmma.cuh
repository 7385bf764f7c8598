// The Hopper prefill attention (attention_prefill_wgmma.cu), for attention_prefill.cu's dispatch:
// 16-bit (C = T) and fp8 (C = KvFp8) caches, head_dim 64 and 128, compute capability 9.x.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention.h"

namespace lmx::kernels::cuda::prefill {

constexpr bool wgmma_head_dim(int d) { return d == 64 || d == 128; }

// paged_attention_prefill's arguments, scale_log2 = its scale (times the layout's k scale) times
// log2(e). Launches a grid of 128-query tiles.
template <typename T, typename C, int D, bool ALIBI>
void launch_wgmma(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                  const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
                  const int32_t* cu_q, int num_seqs, int max_q_len, T* out, int heads,
                  float scale_log2, const float* alibi_slopes, int window, const PagedKvLayout& L,
                  cudaStream_t stream);

}  // namespace lmx::kernels::cuda::prefill
