// Attention over a paged KV cache, for a ragged batch of tokens from several sequences.
//
// KV cache of one layer: k_cache, v_cache: [num_blocks, block_size, kv_heads, head_dim].
// A sequence's token at position p lives in block block_table[p / block_size], slot
// p % block_size. block_tables: [num_seqs, max_blocks_per_seq] (row-major).
// Per token t of the batch: token_seq[t] (row of block_tables), token_pos[t] (its position).
//
// write_kv: stores k, v of each batch token into its slot.
//   k, v: [tokens, row_stride] with kv_heads * head_dim values starting at column 0.
//   storage (kernels/kv_dtype.h): model stores the values as they are; fp8_e4m3 stores
//   round_to_e4m3(x, layout.scale.k or .v) of each value (the cache stays fp32 and holds exactly
//   what an fp8 cache with those scales would decode to; k and v themselves are not changed).
//   paged_attention then reads the fp32 cache as it is (the scales are already applied).
// paged_attention: causal attention of each token over positions [lo, token_pos] of its own
//   sequence, lo = max(0, token_pos - window + 1) when window > 0 (sliding window), else 0.
//   q: [tokens, q_stride] with heads * head_dim values at column 0; GQA maps query head h to
//   kv head h / (heads / kv_heads). out: [tokens, heads * head_dim].
//   Score of token t, query head h, key position p (fp32, before the softmax over p):
//     s(t, h, p) = scale * dot(q[t, h], k[p]) + alibi_slopes[h] * (p - token_pos[t])
//   alibi_slopes: [heads] fp32 (ALiBi, e.g. Bloom), or nullptr for no bias. The bias is <= 0 and
//   softmax-equivalent to Hugging Face Bloom's slope * p (softmax is shift-invariant per row);
//   it combines with the window and GQA.
// CPU: fp32, host memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kv_dtype.h"
#include "kernels/stream.h"

namespace lmx::kernels {

// One layer's cache: its geometry and its fp8 dequantization scales (kernels/kv_dtype.h; {1, 1}
// for a model-dtype cache, which the backends always pass).
struct PagedKvLayout {
  int block_size;
  int kv_heads;
  int head_dim;
  int max_blocks_per_seq;  // row length of block_tables
  KvScale scale{};         // cached K = code * scale.k, V = code * scale.v
};

}  // namespace lmx::kernels

namespace lmx::kernels::cpu {

void write_kv(const float* k, const float* v, int row_stride, float* k_cache, float* v_cache,
              const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
              int tokens, const PagedKvLayout& layout, KvDtype storage = KvDtype::model);

// alibi_slopes: [heads], host memory, or nullptr.
void paged_attention(const float* q, int q_stride, const float* k_cache, const float* v_cache,
                     const int32_t* block_tables, const int32_t* token_seq,
                     const int32_t* token_pos, float* out, int tokens, int heads, float scale,
                     const float* alibi_slopes, int window, const PagedKvLayout& layout);

}  // namespace lmx::kernels::cpu

// ---- CUDA ---------------------------------------------------------------------------------------
// T = __half or __nv_bfloat16, all pointers in device memory, fp32 scores / softmax / accumulation.
// C = the caches' element type: T, or KvFp8 (__nv_fp8_e4m3, kernels/cuda/kv_types.cuh: E4M3 codes,
// kernels/kv_dtype.h), widened exactly as they are read. layout.scale applies to any C: the
// score scale becomes scale * layout.scale.k (exact when it is 1) and the output is multiplied
// by layout.scale.v in its normalization (1 / l becomes scale.v / l).
// Same cache layout and per-token metadata as the CPU reference (int32, device):
//   block_tables [num_seqs, max_blocks_per_seq], token_seq [tokens], token_pos [tokens].
// The batch's own K/V must already be in the cache. Launchers only enqueue on `stream`: no
// allocation, no synchronization, no host state that changes between steps (graph-capturable
// when the grid-shaping host ints below are kept fixed, e.g. at their bucket maxima).
// alibi_slopes: [heads] fp32, device memory, or nullptr (no bias): the score formula above, with
// the bias added in fp32 to the scaled score before the online softmax's max / exp (a kernel
// variant of its own, so the calls without ALiBi run the code they ran before).
// Requirements: head_dim in {64, 80, 96, 128, 256}; heads % kv_heads == 0; q_stride % 8 == 0 and
// the q / caches / out 16-byte aligned (cp.async). Any block_size >= 1. See docs/attention.md.
namespace lmx::kernels::cuda {

// Bytes of split-K scratch paged_attention_decode can use for batches of up to max_tokens tokens
// whose attended ranges are at most max_context positions. Passing less (or nullptr / 0) is
// safe: the launcher then uses fewer splits (1 split needs no workspace), only slower.
size_t paged_attention_decode_workspace_bytes(int max_tokens, int heads, int kv_heads, int head_dim,
                                              int max_context);

// Decode ("flash-decoding"): one CTA per (token, kv head [, head chunk], split of the keys);
// every query head of a kv-head group shares one pass over the K/V blocks. Groups <= 2 (MHA):
// each warp streams its own keys and a thread-block cluster merges the splits (no workspace);
// larger groups: a second kernel merges the splits from the workspace. Correct for ANY ragged
// batch (each token is independent: decode tokens, several tokens per sequence, even whole
// prefill chunks), fast when tokens are few per sequence.
//   q: [tokens, q_stride], out: [tokens, heads * head_dim].
//   max_context: upper bound on the attended length (token_pos + 1, or min with window) over the
//     batch; it only shapes the grid (number of splits). A larger value is always correct; a
//     smaller one is also correct (the last split takes the rest), only slower. For a captured
//     graph use the bucket's maximum (e.g. max_model_len).
//   workspace: device scratch of workspace_bytes (see above), fp32 partials; not read across calls.
template <typename T, typename C>
void paged_attention_decode(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                            const int32_t* block_tables, const int32_t* token_seq,
                            const int32_t* token_pos, T* out, int tokens, int heads, float scale,
                            const float* alibi_slopes, int window, const PagedKvLayout& layout,
                            int max_context, void* workspace, size_t workspace_bytes,
                            cudaStream_t stream);

enum class PrefillKernel { kBest, kMmaSync };

// Prefill (flash-attention 2 on tensor cores), online softmax, causal + sliding window per query
// row, K/V gathered from the paged cache. On Hopper with a 16-bit cache and head_dim 64 or 128:
// wgmma, tiles of 128 queries x 128 keys (kernels/cuda/attention_prefill_wgmma.cu); otherwise, or
// with kernel = kMmaSync (tests and benchmarks compare the two), mma.sync m16n8k16, tiles of 64 or
// 128 queries x 64 keys (head_dim 256: 64 x 32).
// The batch is a list of num_seqs chunks: chunk i = batch tokens [cu_q[i], cu_q[i+1]), all of one
// sequence (token_seq of those tokens equal), positions token_pos (normally consecutive: a chunk
// at [start, start + n) attends to every cached position <= its own, so chunked prefill works).
//   cu_q: [num_seqs + 1] int32, device. max_q_len >= max chunk length (shapes the grid only).
//   q: [tokens, q_stride], out: [tokens, heads * head_dim]. Decode tokens may be passed as
//   chunks of length 1 (correct but wasteful: use paged_attention_decode for those).
template <typename T, typename C>
void paged_attention_prefill(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                             const int32_t* block_tables, const int32_t* token_seq,
                             const int32_t* token_pos, const int32_t* cu_q, int num_seqs,
                             int max_q_len, T* out, int heads, float scale,
                             const float* alibi_slopes, int window, const PagedKvLayout& layout,
                             cudaStream_t stream, PrefillKernel kernel = PrefillKernel::kBest);

// Head dims the tuned decode / prefill kernels are compiled for.
constexpr bool tuned_attention_head_dim(int d) {
  return d == 64 || d == 80 || d == 96 || d == 128 || d == 256;
}

// Generic path for any head_dim <= 256 (e.g. 8, 16, 32, 48) and T = float too: one warp per
// (token, head), online softmax. Same metadata as the CPU reference; slow but exact in fp32.
size_t constexpr kGenericAttentionMaxHeadDim = 256;
template <typename T, typename C>
void paged_attention_generic(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                             const int32_t* block_tables, const int32_t* token_seq,
                             const int32_t* token_pos, T* out, int tokens, int heads, float scale,
                             const float* alibi_slopes, int window, const PagedKvLayout& layout,
                             cudaStream_t stream);

}  // namespace lmx::kernels::cuda
