// Embedding lookup, row gather, bias add (+ residual).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"

namespace lmx::kernels::cuda {
namespace {

using namespace detail;

// One block per output row: out[t] = table[ids[t]] (+ pos_table[positions[t]]). table is not
// __restrict__ (no read-only loads): as a row gather it is the previous kernel's output, which a
// programmatic dependent launch overlaps.
template <typename T, int N>
__global__ void embedding_kernel(const int32_t* __restrict__ ids, const T* table,
                                 const int32_t* __restrict__ positions,
                                 const T* __restrict__ pos_table, T* __restrict__ out, int cols) {
  pdl::wait_for_primary();
  pdl::allow_dependents();  // as a row gather, the LM head may start streaming its weights
  const int t = blockIdx.x;
  const int packs = cols / N;
  const T* src = table + size_t(ids[t]) * cols;
  const T* psrc = pos_table ? pos_table + size_t(positions[t]) * cols : nullptr;
  T* dst = out + size_t(t) * cols;
  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
    Pack<T, N> a = load<T, N>(src, i);
    if (psrc) {
      const Pack<T, N> b = load<T, N>(psrc, i);
#pragma unroll
      for (int j = 0; j < N; ++j) a.v[j] = from_f<T>(to_f(a.v[j]) + to_f(b.v[j]));
    }
    store<T, N>(dst, i, a);
  }
}

template <typename T>
void launch_embedding(const int32_t* ids, const T* table, const int32_t* positions,
                      const T* pos_table, T* out, int tokens, int cols, cudaStream_t stream) {
  if (tokens == 0) return;
  if (!pos_table) positions = nullptr;
  constexpr int V = kVec<T>;
  if (vec_ok(cols, sizeof(T), {table, pos_table, out})) {
    const int threads = std::min(512, (cols / V + 31) / 32 * 32);
    pdl::launch_dependent(embedding_kernel<T, V>, dim3(tokens), dim3(threads), 0, stream, ids,
                          table, positions, pos_table, out, cols);
  } else {
    const int threads = std::min(512, (cols + 31) / 32 * 32);
    pdl::launch_dependent(embedding_kernel<T, 1>, dim3(tokens), dim3(threads), 0, stream, ids,
                          table, positions, pos_table, out, cols);
  }
}

// Grid-stride over packs of [tokens, cols]: out = x + bias (+ residual).
template <typename T, int N>
__global__ void bias_add_kernel(const T* x, const T* __restrict__ bias, const T* residual, T* out,
                                size_t packs, int col_packs) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < packs;
       i += size_t(gridDim.x) * blockDim.x) {
    Pack<T, N> a = load<T, N>(x, i);
    float f[N];
#pragma unroll
    for (int j = 0; j < N; ++j) f[j] = to_f(a.v[j]);
    if (bias) {
      const Pack<T, N> b = load<T, N>(bias, i % col_packs);
#pragma unroll
      for (int j = 0; j < N; ++j) f[j] += to_f(b.v[j]);
    }
    if (residual) {
      const Pack<T, N> r = load<T, N>(residual, i);
#pragma unroll
      for (int j = 0; j < N; ++j) f[j] += to_f(r.v[j]);
    }
#pragma unroll
    for (int j = 0; j < N; ++j) a.v[j] = from_f<T>(f[j]);
    store<T, N>(out, i, a);
  }
}

// Grid-stride over w [rows, cols]: w[n, k] = w[n, k] * scale[k] (fp32 product, one rounding).
template <typename T>
__global__ void scale_columns_kernel(T* w, const T* __restrict__ scale, size_t n, int cols) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    w[i] = from_f<T>(to_f(w[i]) * to_f(scale[i % cols]));
}

int grid_for(size_t items, int threads) {
  // Enough blocks to fill 132 SMs several times over; the loop covers the rest.
  const size_t blocks = (items + threads - 1) / threads;
  return int(std::min<size_t>(blocks, 132 * 16));
}

}  // namespace

template <typename T>
void embedding(const int32_t* ids, const T* table, const int32_t* positions,
               const T* positions_table, T* out, int tokens, int hidden, cudaStream_t stream) {
  launch_embedding<T>(ids, table, positions, positions_table, out, tokens, hidden, stream);
}

template <typename T>
void gather_rows(const T* x, const int32_t* rows, T* out, int n, int cols, cudaStream_t stream) {
  launch_embedding<T>(rows, x, nullptr, nullptr, out, n, cols, stream);
}

template <typename T>
void bias_add(const T* x, const T* bias, const T* residual, T* out, int tokens, int cols,
              cudaStream_t stream) {
  const size_t n = size_t(tokens) * cols;
  if (n == 0) return;
  constexpr int V = kVec<T>;
  constexpr int threads = 256;
  if (vec_ok(cols, sizeof(T), {x, bias, residual, out})) {
    bias_add_kernel<T, V><<<grid_for(n / V, threads), threads, 0, stream>>>(x, bias, residual,
                                                                           out, n / V, cols / V);
  } else {
    bias_add_kernel<T, 1><<<grid_for(n, threads), threads, 0, stream>>>(x, bias, residual, out, n,
                                                                       cols);
  }
}

template <typename T>
void scale_columns(T* w, const T* scale, int rows, int cols, cudaStream_t stream) {
  const size_t n = size_t(rows) * cols;
  if (n == 0) return;
  constexpr int threads = 256;
  scale_columns_kernel<T><<<grid_for(n, threads), threads, 0, stream>>>(w, scale, n, cols);
}

#define LMX_INSTANTIATE(T)                                                                   \
  template void scale_columns<T>(T*, const T*, int, int, cudaStream_t);                      \
  template void embedding<T>(const int32_t*, const T*, const int32_t*, const T*, T*, int, int, \
                             cudaStream_t);                                                  \
  template void gather_rows<T>(const T*, const int32_t*, T*, int, int, cudaStream_t);        \
  template void bias_add<T>(const T*, const T*, const T*, T*, int, int, cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
