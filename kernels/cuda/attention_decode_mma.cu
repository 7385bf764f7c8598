// decode_mma_kernel (attention_decode_mma.cuh): grouped-KV decode attention on tensor cores.
//
// Grid (splits, kv_heads, tokens), 4 warps. Each warp streams its own 16-key chunks of the CTA's
// range (chunks w, w + 4, ...) through its own double-buffered K and V tiles (cp.async, 16-byte,
// zero-filled past the end; the next chunk loads while this one computes) and keeps its own
// online-softmax state, synchronizing only with __syncwarp, as decode_warp_kernel does. Per
// chunk, with g = lane / 4 and t = lane % 4 (kernels/cuda/mma.cuh's fragments):
//   S [16 heads x 16 keys] = Q K^T: A = the group's q rows (rows past the group zero; loaded once,
//     unscaled, in T), B = K rows read as pairs (two mma n-tiles of 8 keys, head_dim / 16 k-steps),
//     fp32; then times scale * log2(e), keys past the end -inf.
//   online softmax per head row in the log2 domain: the row max over the quad's lanes (shuffles),
//     each lane's partial row sum l (summed over the quad at the end).
//   O [16 x D] += P V: P's fp32 fragments are A's (the C fragments of the two n-tiles are the A
//     fragment of 16 keys), rounded to T as the prefill kernel rounds P; B = V read transposed
//     (ldmatrix.trans of a 16-bit cache; an fp8 cache's bytes widened in pairs).
// At the end the 4 warps merge through shared memory (the tiles' space) and the CTA writes its
// output or its split's partial. The fp8 cache: codes widened to T exactly (every E4M3 value is
// an fp16 and a bf16 value); the scales as in decode_kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include "kernels/cuda/attention_decode_common.cuh"
#include "kernels/cuda/attention_decode_mma.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/head_dim_dispatch.cuh"
#include "kernels/cuda/kv_types.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace lmx::kernels::cuda::decode {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 16;  // keys a warp takes at a time: one k-step of P V
constexpr int kRows = 16;   // mma rows: the group's heads, zero past the group

// One warp's K or V tile: kChunk rows of Tile's padded geometry (conflict-free pair loads down a
// column, and ldmatrix rows in distinct banks).
template <typename C, int D>
struct Chunk : Tile<C, D> {
  static constexpr int kElems = kChunk * Tile<C, D>::kRow;
  // Dynamic shared memory of a CTA: [warp][stage][K, V] tiles.
  static constexpr int kSmem = kWarps * 2 * 2 * kElems * int(sizeof(C));
};

template <typename T>
__device__ __forceinline__ uint32_t bits(T v) {
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Two adjacent cache elements (p[0], p[1]) as one fragment register of T (p[0] low).
template <typename T, typename C>
__device__ __forceinline__ uint32_t pair_at(const C* p) {
  if constexpr (kIsFp8<C>) {
    const __nv_fp8x2_e4m3 v = *reinterpret_cast<const __nv_fp8x2_e4m3*>(p);
    if constexpr (std::is_same_v<T, __half>) {
      return bits(__half2(v));
    } else {
      const float2 f = static_cast<float2>(v);
      return pack2<T>(f.x, f.y);
    }
  } else {
    return *reinterpret_cast<const uint32_t*>(p);
  }
}

// (a, b) of the cache type as one fragment register of T (a low): an fp8 cache's column pair.
template <typename T>
__device__ __forceinline__ uint32_t widen_pair(KvFp8 a, KvFp8 b) {
  return pack2<T>(float(a), float(b));
}

// B fragments of P V for the dim n-tiles j and j + 1 from a 16-bit V tile (rows = keys):
// ldmatrix.x4.trans of (keys 0-7, dims 8j..), (keys 8-15, 8j..), (0-7, 8j + 8..), (8-15, 8j + 8..).
template <int kRow, typename C>
__device__ __forceinline__ void v_fragments(const C* v, int j, int lane, uint32_t (&b)[4]) {
  const int key = (lane & 7) + 8 * ((lane >> 3) & 1);
  const int dim = 8 * j + 8 * (lane >> 4);
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(v + key * kRow + dim));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
               : "r"(addr));
}

template <typename T, typename C, int D>
__global__ void __launch_bounds__(kThreads)
    decode_mma_kernel(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                      const int32_t* __restrict__ block_tables,
                      const int32_t* __restrict__ token_seq, const int32_t* __restrict__ token_pos,
                      T* __restrict__ out, float* __restrict__ ws_acc, float2* __restrict__ ws_ml,
                      int heads, float scale_log2, int window, PagedKvLayout L, int splits,
                      int split_keys) {
  using Geo = Chunk<C, D>;
  constexpr int kRow = Geo::kRow, kElems = Geo::kElems, kVec = Geo::kVec;
  constexpr int kSteps = D / 16;  // k-steps of QK
  constexpr int kTiles = D / 8;   // n-tiles of P V
  static_assert(D % 16 == 0, "head_dim a multiple of 16");
  static_assert(kWarps * kRows * D * int(sizeof(float)) <= Geo::kSmem, "the merge fits the tiles");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float2 ml_s[kWarps][kRows];

  pdl::wait_for_primary();  // q and this step's K/V rows come from the kernel before
  pdl::allow_dependents();  // the output projection may start streaming its weights

  const int split = blockIdx.x, kvh = blockIdx.y, tok = blockIdx.z;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int group = heads / L.kv_heads, h0 = kvh * group;
  const int pos = token_pos[tok];
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const int begin = lo + split * split_keys;
  if (begin > pos) return;  // this token's range has fewer splits
  const int end = split == splits - 1 ? pos + 1 : min(pos + 1, begin + split_keys);
  const int chunks = (end - begin + kChunk - 1) / kChunk;
  const int32_t* table = block_tables + size_t(token_seq[tok]) * L.max_blocks_per_seq;

  C* const tiles = reinterpret_cast<C*>(smem) + warp * 2 * 2 * kElems;  // [stage][K, V]
  auto load_chunk = [&](int c, int stage) {
    C* kt = tiles + stage * 2 * kElems;
    C* vt = kt + kElems;
    const int p0 = begin + c * kChunk;
    for (int i = lane; i < kChunk * Geo::kChunks; i += 32) {
      const int r = i / Geo::kChunks, part = i % Geo::kChunks;
      const int p = p0 + r;
      const bool valid = p < end;
      const size_t off = valid ? kv_row(table[p / L.block_size], p, L, kvh) * D + part * kVec : 0;
      cp_async16(kt + r * kRow + part * kVec, k_cache + off, valid);
      cp_async16(vt + r * kRow + part * kVec, v_cache + off, valid);
    }
    cp_async_commit();
  };
  if (warp < chunks) load_chunk(warp, 0);

  // The group's q rows as A fragments (rows g and g + 8; zero past the group), unscaled.
  uint32_t qa[kSteps][4];
  {
    const T* q0 = q + size_t(tok) * q_stride + size_t(h0) * D;
    const bool r0 = g < group, r1 = g + 8 < group;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int d = 16 * s + 2 * t;
      qa[s][0] = r0 ? *reinterpret_cast<const uint32_t*>(q0 + g * D + d) : 0u;
      qa[s][1] = r1 ? *reinterpret_cast<const uint32_t*>(q0 + (g + 8) * D + d) : 0u;
      qa[s][2] = r0 ? *reinterpret_cast<const uint32_t*>(q0 + g * D + d + 8) : 0u;
      qa[s][3] = r1 ? *reinterpret_cast<const uint32_t*>(q0 + (g + 8) * D + d + 8) : 0u;
    }
  }

  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g, g + 8

  int stage = 0;
  for (int c = warp; c < chunks; c += kWarps, stage ^= 1) {
    if (c + kWarps < chunks) {
      load_chunk(c + kWarps, stage ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();
    const C* kt = tiles + stage * 2 * kElems;
    const C* vt = kt + kElems;

    // S = Q K^T: s[n] = rows (g, g + 8) x keys (8n + 2t, 8n + 2t + 1).
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int k = 0; k < kSteps; ++k)
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const C* row = kt + (8 * n + g) * kRow + 16 * k + 2 * t;
        mma_m16n8k16<T>(s[n], qa[k], pair_at<T>(row), pair_at<T>(row + 8));
      }

    // Online softmax, rows g (s[n][0..1]) and g + 8 (s[n][2..3]).
    const int key0 = begin + c * kChunk;
    float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool valid = key0 + 8 * n + 2 * t + (e & 1) < end;
        s[n][e] = valid ? s[n][e] * scale_log2 : -INFINITY;
        row_max[e / 2] = fmaxf(row_max[e / 2], s[n][e]);
      }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = fmaxf(row_max[r], __shfl_xor_sync(0xffffffffu, row_max[r], 1));
      row_max[r] = fmaxf(row_max[r], __shfl_xor_sync(0xffffffffu, row_max[r], 2));
      const float m_new = fmaxf(m[r], row_max[r]);  // finite: the chunk's first key is valid
      alpha[r] = exp2f(m[r] - m_new);               // 0 on the warp's first chunk
      m[r] = m_new;
      l[r] *= alpha[r];
    }
    uint32_t pa[4];  // P as the A fragment of 16 keys: (g, 2t..), (g + 8, 2t..), (g, 2t + 8..), ...
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = exp2f(s[n][e] - m[e / 2]);  // 0 for keys past the end
        l[e / 2] += p[e];
      }
      pa[2 * n] = pack2<T>(p[0], p[1]);
      pa[2 * n + 1] = pack2<T>(p[2], p[3]);
    }
    scale_rows(acc, alpha);

    // O += P V.
    if constexpr (kIsFp8<C>) {
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        const C* col = vt + 2 * t * kRow + 8 * j + g;
        mma_m16n8k16<T>(acc[j], pa, widen_pair<T>(col[0], col[kRow]),
                        widen_pair<T>(col[8 * kRow], col[9 * kRow]));
      }
    } else {
#pragma unroll
      for (int j = 0; j < kTiles; j += 2) {
        uint32_t b[4];
        v_fragments<kRow>(vt, j, lane, b);
        mma_m16n8k16<T>(acc[j], pa, b[0], b[1]);
        if (j + 1 < kTiles) mma_m16n8k16<T>(acc[j + 1], pa, b[2], b[3]);
      }
    }
    __syncwarp();  // the tile is refilled two chunks on
  }

  // Merge the warps: each lane's partial row sums over its quad, then (m, l) and O through shared
  // memory (the tiles' space: every warp is past its last tile after the barrier).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  __syncthreads();
  float* o_s = reinterpret_cast<float*>(smem);  // [warp][row][D]
  if (t == 0) {
    ml_s[warp][g] = make_float2(m[0], l[0]);
    ml_s[warp][g + 8] = make_float2(m[1], l[1]);
  }
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    float* o = o_s + (warp * kRows + g) * D + 8 * j + 2 * t;
    *reinterpret_cast<float2*>(o) = make_float2(acc[j][0], acc[j][1]);
    *reinterpret_cast<float2*>(o + 8 * D) = make_float2(acc[j][2], acc[j][3]);
  }
  __syncthreads();
  constexpr int kPairs = D / 2;
  for (int i = threadIdx.x; i < group * kPairs; i += kThreads) {
    const int r = i / kPairs, dp = i % kPairs;
    float2 ml;
    const float2 o = merge_partials(
        kWarps, [&](int w) { return ml_s[w][r]; },
        [&](int w) { return *reinterpret_cast<const float2*>(o_s + (w * kRows + r) * D + 2 * dp); },
        ml);
    const int h = h0 + r;
    if (splits == 1) {
      store_pair(&out[(size_t(tok) * heads + h) * D + 2 * dp], o, L.scale.v / ml.y);
    } else {
      const size_t row = (size_t(tok) * heads + h) * splits + split;
      *reinterpret_cast<float2*>(&ws_acc[row * D + 2 * dp]) = o;
      if (dp == 0) ws_ml[row] = ml;
    }
  }
}

}  // namespace

bool mma_serves(int group, int head_dim, bool alibi) {
  return !alibi && group >= 3 && group <= kRows && head_dim % 16 == 0 && head_dim <= 128;
}

template <typename T, typename C>
void launch_mma(const T* q, int q_stride, const C* k_cache, const C* v_cache,
                const int32_t* block_tables, const int32_t* token_seq, const int32_t* token_pos,
                T* out, float* ws_acc, float2* ws_ml, int tokens, int heads, float scale_log2,
                int window, const PagedKvLayout& layout, int splits, int split_keys,
                cudaStream_t stream) {
  dispatch_head_dim(layout.head_dim, "paged_attention_decode (tensor cores)", [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    if constexpr (D <= 128) {  // else mma_serves refused it
      auto* kernel = decode_mma_kernel<T, C, D>;
      constexpr int smem = Chunk<C, D>::kSmem;
      // Raised on every launch (cheap, allowed during graph capture): 70 KB of tiles at head_dim
      // 128 with a 16-bit cache, 3 CTAs an SM.
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                           int(cudaSharedmemCarveoutMaxShared));
      pdl::launch_dependent(kernel, dim3(splits, layout.kv_heads, tokens), dim3(kThreads), smem,
                            stream, q, q_stride, k_cache, v_cache, block_tables, token_seq,
                            token_pos, out, ws_acc, ws_ml, heads, scale_log2, window, layout,
                            splits, split_keys);
    }
  });
}

#define LMX_INSTANTIATE(T, C)                                                                   \
  template void launch_mma<T, C>(const T*, int, const C*, const C*, const int32_t*,             \
                                 const int32_t*, const int32_t*, T*, float*, float2*, int, int, \
                                 float, int, const PagedKvLayout&, int, int, cudaStream_t);
LMX_KV_CACHE_TYPES_16BIT(LMX_INSTANTIATE)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda::decode
