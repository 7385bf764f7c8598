#include <cfloat>
#include <climits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/philox.h"
#include "kernels/sampling.h"

namespace lmx::kernels::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

struct ArgMax {
  float v;
  int i;
};
__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}
__device__ __forceinline__ ArgMax warp_argmax(ArgMax a) {
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax b{__shfl_xor_sync(0xffffffffu, a.v, o), __shfl_xor_sync(0xffffffffu, a.i, o)};
    a = better(a, b);
  }
  return a;
}

// Log-sum-exp accumulator: s = sum exp(x - m).
struct Lse {
  float m, s;
};
__device__ __forceinline__ Lse merge(Lse a, Lse b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}
__device__ __forceinline__ Lse warp_lse(Lse a) {
  for (int o = 16; o > 0; o >>= 1)
    a = merge(a, Lse{__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)});
  return a;
}

__device__ __forceinline__ unsigned long long warp_sum_u64(unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Order-preserving key of a float: larger float <=> larger key.
__device__ __forceinline__ uint32_t key_of(float z) {
  const uint32_t b = __float_as_uint(z);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

struct Shared {
  unsigned long long hist[256];
  ArgMax am[kWarps];
  Lse lse[kWarps];
  unsigned long long u64[kWarps];
  uint32_t prefix;
  unsigned long long need;
};

__device__ ArgMax block_argmax(ArgMax a, Shared& sh) {
  a = warp_argmax(a);
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.am[threadIdx.x / 32] = a;
  __syncthreads();
  a = sh.am[0];
  for (int w = 1; w < kWarps; ++w) a = better(a, sh.am[w]);  // same order in every thread
  return a;
}
__device__ Lse block_lse(Lse a, Shared& sh) {
  a = warp_lse(a);
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.lse[threadIdx.x / 32] = a;
  __syncthreads();
  a = sh.lse[0];
  for (int w = 1; w < kWarps; ++w) a = merge(a, sh.lse[w]);
  return a;
}
__device__ unsigned long long block_sum_u64(unsigned long long v, Shared& sh) {
  v = warp_sum_u64(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.u64[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < kWarps; ++w) v += sh.u64[w];
  return v;
}

// Fixed-point weight of z for the top-p mass: exp(z - zmax) in 32.32 (<= 2^32 each, a vocab of
// 2^20 sums below 2^52). Integer sums are exact, so the threshold is deterministic.
__device__ __forceinline__ unsigned long long weight_of(float z, float zmax) {
  return (unsigned long long)(expf(z - zmax) * 4294967296.0f);
}

// Radix select from the top: the largest key t with weight(key >= t) >= need, i.e.
// weight(key > t) < need <= weight(key >= t), over elements with key >= floor_key.
// WEIGHTED: weight = weight_of(z), else 1.
template <bool WEIGHTED, typename ZOf>
__device__ uint32_t radix_select(ZOf z_of, int V, uint32_t floor_key, float zmax,
                                 unsigned long long need, Shared& sh) {
  uint32_t prefix = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint32_t mask = shift == 24 ? 0u : (0xFFFFFFFFu << (shift + 8));
    for (int b = threadIdx.x; b < 256; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    // Logits cluster in a few bins (same exponent), so 1024 threads adding to one shared counter
    // serialize: combine the lanes of a warp that hit the same bin first, one atomic per bin per
    // warp. Every thread runs the same number of iterations (full-warp shuffles).
    const int lane = threadIdx.x % 32;
    for (int i0 = 0; i0 < V; i0 += kThreads) {
      const int i = i0 + threadIdx.x;
      int bin = 256;  // none
      unsigned long long w = 0;
      if (i < V) {
        const float z = z_of(i);
        const uint32_t k = key_of(z);
        if (k >= floor_key && (k & mask) == prefix) {
          bin = int((k >> shift) & 255u);
          w = WEIGHTED ? weight_of(z, zmax) : 1ull;
        }
      }
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      unsigned long long sum = 0;
      if (WEIGHTED) {
        for (int src = 0; src < 32; ++src) {
          const unsigned long long ws = __shfl_sync(0xffffffffu, w, src);
          if (peers >> src & 1u) sum += ws;
        }
      } else {
        sum = __popc(peers);
      }
      if (bin < 256 && lane == __ffs(peers) - 1) atomicAdd(&sh.hist[bin], sum);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane l owns bins 255 - 8l .. 248 - 8l (descending); find the bin where the cumulative
      // weight from the top first reaches `need`.
      unsigned long long mine = 0;
      for (int j = 0; j < 8; ++j) mine += sh.hist[255 - 8 * lane - j];
      unsigned long long incl = mine;  // inclusive scan over lanes
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
      }
      const unsigned long long excl = incl - mine;
      const unsigned hit = __ballot_sync(0xffffffffu, incl >= need);
      // need <= total weight always holds; fall back to the last lane defensively.
      const int owner = hit ? __ffs(hit) - 1 : 31;
      if (lane == owner) {
        unsigned long long acc = excl;
        int bin = 255 - 8 * lane - 7;
        for (int j = 0; j < 8; ++j) {
          const int b = 255 - 8 * lane - j;
          if (acc + sh.hist[b] >= need) {
            bin = b;
            break;
          }
          acc += sh.hist[b];
        }
        sh.prefix = prefix | (uint32_t(bin) << shift);
        sh.need = need - acc;
      }
    }
    __syncthreads();
    prefix = sh.prefix;
    need = sh.need;
  }
  return prefix;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* logits, int V, const SamplingRow* __restrict__ params,
                  const int32_t* __restrict__ prev_ids, int prev_stride,
                  const int32_t* __restrict__ prev_len, int32_t* __restrict__ out_ids,
                  float* __restrict__ out_logprob) {
  pdl::wait_for_primary();
  pdl::allow_dependents();
  extern __shared__ uint32_t seen[];  // [ceil(V / 32)] history bitmap
  __shared__ Shared sh;
  const int r = blockIdx.x;
  const float* row = logits + size_t(r) * V;
  const SamplingRow p = params[r];
  const bool penalty = p.repetition_penalty != 1.0f && prev_ids && prev_len;
  if (penalty) {
    const int words = (V + 31) / 32;
    for (int w = threadIdx.x; w < words; w += kThreads) seen[w] = 0;
    __syncthreads();
    const int32_t* ids = prev_ids + size_t(r) * prev_stride;
    for (int i = threadIdx.x; i < prev_len[r]; i += kThreads) {
      const int32_t id = ids[i];
      if (id >= 0 && id < V) atomicOr(&seen[id / 32], 1u << (id % 32));
    }
    __syncthreads();
  }
  const float pen = p.repetition_penalty;
  auto penalize = [&](float l, int i) {
    if (penalty && (seen[i / 32] >> (i % 32) & 1u)) return l < 0.0f ? l * pen : l / pen;
    return l;
  };
  auto y_of = [&](int i) { return penalize(row[i], i); };

  // Pass 1: log-sum-exp of the raw logits, argmax of the penalized ones. A thread loads
  // kBatch elements before using any, so the row streams instead of one load at a time.
  constexpr int kBatch = 8;
  Lse lse{-INFINITY, 0.0f};
  ArgMax am{-INFINITY, INT_MAX};
  for (int base = threadIdx.x; base < V; base += kThreads * kBatch) {
    float batch[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = base + j * kThreads;
      batch[j] = i < V ? row[i] : -INFINITY;
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = base + j * kThreads;
      if (i >= V) break;
      const float l = batch[j];
      if (l > lse.m) {  // online log-sum-exp, one expf per element
        lse.s = lse.s * expf(lse.m - l) + 1.0f;
        lse.m = l;
      } else if (l != -INFINITY) {
        lse.s += expf(l - lse.m);
      }
      am = better(am, ArgMax{penalize(l, i), i});
    }
  }
  lse = block_lse(lse, sh);
  am = block_argmax(am, sh);
  if (am.i == INT_MAX) am.i = 0;  // all NaN: anything valid

  int chosen = am.i;
  if (!p.greedy) {
    const float temp = p.temperature;
    auto z_of = [&](int i) { return y_of(i) / temp; };
    const float zmax = am.v / temp;
    uint32_t floor_key = 0;
    if (p.top_k > 0 && p.top_k < V)
      floor_key = radix_select<false>(z_of, V, 0u, zmax, (unsigned long long)p.top_k, sh);
    if (p.top_p < 1.0f) {
      unsigned long long w = 0;
      for (int i = threadIdx.x; i < V; i += kThreads) {
        const float z = z_of(i);
        if (key_of(z) >= floor_key) w += weight_of(z, zmax);
      }
      const unsigned long long total = block_sum_u64(w, sh);
      unsigned long long need = (unsigned long long)ceil(double(p.top_p) * double(total));
      need = need < 1 ? 1 : (need > total ? total : need);
      floor_key = radix_select<true>(z_of, V, floor_key, zmax, need, sh);
    }
    // Gumbel-max over the kept set.
    ArgMax g{-INFINITY, INT_MAX};
    for (int i = threadIdx.x; i < V; i += kThreads) {
      const float z = z_of(i);
      if (key_of(z) < floor_key) continue;
      const float u = philox_uniform_at(p.seed, p.step, uint32_t(i));
      g = better(g, ArgMax{z - logf(-logf(u)), i});
    }
    g = block_argmax(g, sh);
    if (g.i != INT_MAX) chosen = g.i;
  }
  if (threadIdx.x == 0) {
    out_ids[r] = chosen;
    out_logprob[r] = row[chosen] - (lse.m + logf(lse.s));
  }
}

// One block a row: the rank's columns reduced to their log-sum-exp and best key (sample_kernel's
// keys: the raw logit when greedy, else z - log(-log(u)) at the vocabulary id).
__global__ void __launch_bounds__(kThreads)
    draw_partials_kernel(const float* logits, int ld, int cols, int first_id,
                         const SamplingRow* __restrict__ params, DrawPartial* __restrict__ out) {
  pdl::wait_for_primary();
  pdl::allow_dependents();
  __shared__ Shared sh;
  const int r = blockIdx.x;
  const float* row = logits + size_t(r) * ld;
  const SamplingRow p = params[r];
  Lse lse{-INFINITY, 0.0f};
  ArgMax best{-INFINITY, INT_MAX};
  for (int i = threadIdx.x; i < cols; i += kThreads) {
    const float l = row[i];
    if (l > lse.m) {
      lse.s = lse.s * expf(lse.m - l) + 1.0f;
      lse.m = l;
    } else if (l != -INFINITY) {
      lse.s += expf(l - lse.m);
    }
    float key = l;
    if (!p.greedy) {
      const float u = philox_uniform_at(p.seed, p.step, uint32_t(first_id + i));
      key = l / p.temperature - logf(-logf(u));
    }
    best = better(best, ArgMax{key, i});
  }
  lse = block_lse(lse, sh);
  best = block_argmax(best, sh);
  if (threadIdx.x == 0) {
    const bool any = best.i != INT_MAX;
    out[r] = DrawPartial{best.v, first_id + (any ? best.i : 0), any ? row[best.i] : -INFINITY,
                         lse.m, lse.s};
  }
}

// One thread a row: the best key over the ranks (in vocabulary order: ties keep the lower id)
// and the merged log-sum-exp.
__global__ void combine_draws_kernel(const DrawPartial* __restrict__ parts, int ranks, int n,
                                     int32_t* __restrict__ out_ids, float* __restrict__ out_logprob) {
  pdl::wait_for_primary();
  pdl::allow_dependents();
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  DrawPartial best = parts[r];
  Lse lse{best.max, best.sum};
  for (int k = 1; k < ranks; ++k) {
    const DrawPartial d = parts[size_t(k) * n + r];
    if (d.key > best.key) best = d;
    lse = merge(lse, Lse{d.max, d.sum});
  }
  out_ids[r] = best.id;
  out_logprob[r] = best.logit - (lse.m + logf(lse.s));
}

}  // namespace

void draw_partials(const float* logits, int n, int ld, int cols, int first_id,
                   const SamplingRow* params, DrawPartial* out, cudaStream_t stream) {
  if (n == 0) return;
  pdl::launch_dependent(draw_partials_kernel, dim3(n), dim3(kThreads), 0, stream, logits, ld, cols,
                        first_id, params, out);
}

void combine_draws(const DrawPartial* parts, int ranks, int n, int32_t* out_ids, float* out_logprob,
                   cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kRowsABlock = 128;
  pdl::launch_dependent(combine_draws_kernel, dim3((n + kRowsABlock - 1) / kRowsABlock),
                        dim3(kRowsABlock), 0, stream, parts, ranks, n, out_ids, out_logprob);
}

void sample(const float* logits, int n, int vocab, const SamplingRow* params,
            const int32_t* prev_ids, int prev_stride, const int32_t* prev_len, int32_t* out_ids,
            float* out_logprob, cudaStream_t stream) {
  if (n == 0) return;
  const size_t bitmap = size_t((vocab + 31) / 32) * sizeof(uint32_t);
  if (bitmap + sizeof(Shared) > 48 * 1024)  // not a stream operation: fine inside graph capture
    cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bitmap));
  pdl::launch_dependent(sample_kernel, dim3(n), dim3(kThreads), bitmap, stream, logits, vocab,
                        params, prev_ids, prev_stride, prev_len, out_ids, out_logprob);
}

}  // namespace lmx::kernels::cuda
