// Grouped-KV decode attention on tensor cores (attention_decode_mma.cu), one of the split-K
// decode kernels behind paged_attention_decode (attention_decode.cu, which plans the splits and
// merges them with decode_reduce_kernel). For 3-16 query heads per KV head the group's heads are
// the rows of one mma.sync m16n8k16: QK as [16 heads x d] x [d x 16 keys], P V as
// [16 heads x 16 keys] x [16 keys x d], fp32 accumulation, where the fp32-FMA decode_kernel
// spends 4-8 FMAs a byte of K/V and is bound by arithmetic, not memory (bench/RESULTS.md,
// "Grouped-KV decode attention over the issue 26 grid").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/stream.h"

namespace lmx::kernels::cuda::decode {

// Whether decode_mma_kernel serves a group of `group` query heads per KV head at `head_dim`
// (3..16 heads; head_dim 64, 80, 96 or 128; no ALiBi).
bool mma_serves(int group, int head_dim, bool alibi);

// Grid (splits, kv_heads, tokens) over the keys [lo + split * split_keys, ...) of each token's
// attended range (lo: the window's start), as decode_kernel: one split writes `out` (normalized,
// times layout.scale.v), several write fp32 partials to ws_acc [tokens, heads, splits, D] and
// ws_ml [tokens, heads, splits] (m, l) for decode_reduce_kernel. scale_log2: the score scale
// (with layout.scale.k) times log2(e). A programmatic dependent of the kernel that writes q and
// the step's K/V.
template <typename T, typename C>
void launch_mma(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
                T* out, float* ws_acc, float2* ws_ml, int tokens, int heads, float scale_log2,
                int window, const PagedKvLayout& layout, int splits, int split_keys,
                cudaStream_t stream);

}  // namespace lmx::kernels::cuda::decode
