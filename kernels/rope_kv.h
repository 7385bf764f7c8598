// The attention prologue after the fused qkv GEMM, in one pass: optional qkv bias, rotary on q and
// k (Hugging Face rotate-half, partial rotary; see rotary.h), and the K/V write into the paged
// cache (see attention.h for the cache layout and block tables).
//
// qkv: [tokens, qkv_stride], in/out: q heads at column 0 (heads * head_dim), k at q_size =
//   heads * head_dim, v at q_size + kv_size (kv_size = kv_heads * head_dim). After the call q and k
//   are biased and rotated, v biased, in place (attention then reads q from here).
// qkv_bias: [q_size + 2 * kv_size] or null.
// token_pos: [tokens], the position of each token: the rotary angle uses it and it picks the cache
//   slot (block_tables[token_seq[t]][pos / block_size], offset pos % block_size), exactly as
//   write_kv.
// token_seq: [tokens], row of block_tables; a negative value skips the cache write for that token
//   (padding rows of a CUDA-graph batch bucket).
// inv_freq: [rotary_dim / 2] fp32 with scaling folded in; rotary_dim == 0 (or inv_freq null) is the
//   plain variant for learned positions: bias + KV write only.
// k_cache, v_cache: [num_blocks, block_size, kv_heads, head_dim] of one layer.
// storage (CPU; kernels/kv_dtype.h): model stores k and v as computed; fp8_e4m3 stores
//   round_to_e4m3(x, layout.scale.k or .v) of each value (the cache stays fp32). qkv keeps the
//   unrounded values either way (attention's q is never rounded; only the cache is).
// CPU: fp32, host. CUDA: T = float, __half or __nv_bfloat16 (qkv, bias in T); the cache in C = T
// or KvFp8 (kernels/cuda/kv_types.cuh): each k value stored as x / layout.scale.k and each v
// value as x / layout.scale.v (fp32 IEEE division, exact for scale 1), rounded once to C; token
// arrays and inv_freq in device memory; angles in fp32 (pos * inv_freq, precise sincosf, like the
// CPU reference and transformers); no allocation, no synchronization.
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/kv_dtype.h"
#include "kernels/stream.h"

namespace lmx::kernels::cpu {

void rope_write_kv(float* qkv, int qkv_stride, const float* qkv_bias, const int32_t* token_pos,
                   const float* inv_freq, int rotary_dim, int heads, float* k_cache, float* v_cache,
                   const int32_t* block_tables, const int32_t* token_seq, int tokens,
                   const PagedKvLayout& layout, KvDtype storage = KvDtype::model);

}  // namespace lmx::kernels::cpu

namespace lmx::kernels::cuda {

template <typename T, typename C>
void rope_write_kv(T* qkv, int qkv_stride, const T* qkv_bias, const int32_t* token_pos,
                   const float* inv_freq, int rotary_dim, int heads, C* k_cache, C* v_cache,
                   const int32_t* block_tables, const int32_t* token_seq, int tokens,
                   const PagedKvLayout& layout, cudaStream_t stream);

}  // namespace lmx::kernels::cuda
