#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm_rows.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/norm.h"

namespace lmx::kernels::cuda {
namespace {

using namespace detail;

// One block per row of [rows, cols]. Each thread owns up to VPT packs of N elements (pack i of the
// row for i = threadIdx.x + k * blockDim.x), kept in registers between the reduction and the
// output, so the row is read once and written once (+ the residual write).
// LAYER: layer norm (mean, then variance from the registers: two-pass, no cancellation).
template <typename T, int N, int VPT, bool LAYER>
__global__ void __launch_bounds__(1024)
    add_norm_kernel(const T* in, T* residual_out,
                    const T* x, const T* __restrict__ weight,
                    const T* __restrict__ bias, T* out, int cols, float eps) {
  pdl::wait_for_primary();
  pdl::allow_dependents();  // the next projection may start streaming its weights
  __shared__ float scratch[33];
  const size_t row = blockIdx.x;
  const int packs = cols / N;
  const T* in_row = in + row * cols;
  float v[VPT][N];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < packs) {
      Pack<T, N> a = load<T, N>(in_row, i);
      if (x) {
        const Pack<T, N> b = load<T, N>(x + row * cols, i);
#pragma unroll
        for (int j = 0; j < N; ++j) a.v[j] = from_f<T>(to_f(a.v[j]) + to_f(b.v[j]));
        store<T, N>(residual_out + row * cols, i, a);
      }
#pragma unroll
      for (int j = 0; j < N; ++j) v[k][j] = to_f(a.v[j]);
    }
  }
  const float2 f = norm_factors(
      LAYER,
      [&](auto&& visit) {
#pragma unroll
        for (int k = 0; k < VPT; ++k)
          if (threadIdx.x + k * blockDim.x < packs)
#pragma unroll
            for (int j = 0; j < N; ++j) visit(v[k][j]);
      },
      cols, eps, scratch);
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < packs) {
      const Pack<T, N> w = load<T, N>(weight, i);
      Pack<T, N> b{};
      if (LAYER) b = load<T, N>(bias, i);
      Pack<T, N> o;
#pragma unroll
      for (int j = 0; j < N; ++j)
        o.v[j] = from_f<T>(normalized(LAYER, v[k][j], f, to_f(w.v[j]), LAYER ? to_f(b.v[j]) : 0.0f));
      store<T, N>(out + row * cols, i, o);
    }
  }
}

// Rows too long for the register cache: three passes over the row (the re-reads hit L2).
template <typename T, bool LAYER>
__global__ void add_norm_long_kernel(const T* in, T* residual_out,
                                     const T* x, const T* __restrict__ weight,
                                     const T* __restrict__ bias, T* out, int cols,
                                     float eps) {
  pdl::wait_for_primary();
  pdl::allow_dependents();
  __shared__ float scratch[33];
  const size_t row = size_t(blockIdx.x) * cols;
  const T* src = x ? residual_out : in;  // after the add, read the updated residual
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float a = to_f(in[row + c]);
    if (x) {
      const T r = from_f<T>(a + to_f(x[row + c]));
      residual_out[row + c] = r;
      a = to_f(r);
    }
    sum += LAYER ? a : a * a;
  }
  float mean = 0.0f, inv;
  if (LAYER) {
    mean = block_sum(sum, scratch) / float(cols);
    float var = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      const float a = to_f(src[row + c]) - mean;
      var += a * a;
    }
    inv = rsqrtf(block_sum(var, scratch) / float(cols) + eps);
  } else {
    inv = rsqrtf(block_sum(sum, scratch) / float(cols) + eps);
  }
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float a = to_f(src[row + c]);
    out[row + c] = LAYER ? from_f<T>((a - mean) * inv * to_f(weight[c]) + to_f(bias[c]))
                         : from_f<T>(to_f(weight[c]) * (a * inv));
  }
}

template <typename T, int N, bool LAYER>
bool launch_cached(const T* in, T* residual, const T* x, const T* weight, const T* bias, T* out,
                   int rows, int cols, float eps, cudaStream_t stream) {
  const int packs = cols / N;
  // Fewest packs per thread (kept in registers: at most 4 packs = 32 floats) within 1024 threads.
  auto go = [&](auto kernel, int vpt) {
    const int threads = ((packs + vpt - 1) / vpt + 31) / 32 * 32;
    pdl::launch_dependent(kernel, dim3(rows), dim3(threads), 0, stream, in, residual, x, weight,
                          bias, out, cols, eps);
    return true;
  };
  if (packs <= 512) return go(add_norm_kernel<T, N, 1, LAYER>, 1);
  if (packs <= 1024) return go(add_norm_kernel<T, N, 2, LAYER>, 2);
  if (packs <= 4096) return go(add_norm_kernel<T, N, 4, LAYER>, 4);
  return false;
}

template <typename T, bool LAYER>
void launch(const T* in, T* residual, const T* x, const T* weight, const T* bias, T* out, int rows,
            int cols, float eps, cudaStream_t stream) {
  if (rows == 0) return;
  constexpr int V = kVec<T>;
  if (vec_ok(cols, sizeof(T), {in, residual, x, weight, bias, out})) {
    if (launch_cached<T, V, LAYER>(in, residual, x, weight, bias, out, rows, cols, eps, stream))
      return;
  } else if (launch_cached<T, 1, LAYER>(in, residual, x, weight, bias, out, rows, cols, eps,
                                        stream)) {
    return;
  }
  pdl::launch_dependent(add_norm_long_kernel<T, LAYER>, dim3(rows), dim3(1024), 0, stream, in,
                        residual, x, weight, bias, out, cols, eps);
}

}  // namespace

template <typename T>
void rms_norm(const T* x, const T* weight, T* out, int rows, int cols, float eps,
              cudaStream_t stream) {
  launch<T, false>(x, nullptr, nullptr, weight, nullptr, out, rows, cols, eps, stream);
}

template <typename T>
void layer_norm(const T* x, const T* weight, const T* bias, T* out, int rows, int cols, float eps,
                cudaStream_t stream) {
  launch<T, true>(x, nullptr, nullptr, weight, bias, out, rows, cols, eps, stream);
}

template <typename T>
void add_rms_norm(T* residual, const T* x, const T* weight, T* out, int rows, int cols, float eps,
                  cudaStream_t stream) {
  launch<T, false>(residual, residual, x, weight, nullptr, out, rows, cols, eps, stream);
}

template <typename T>
void add_layer_norm(T* residual, const T* x, const T* weight, const T* bias, T* out, int rows,
                    int cols, float eps, cudaStream_t stream) {
  launch<T, true>(residual, residual, x, weight, bias, out, rows, cols, eps, stream);
}

#define LMX_INSTANTIATE(T)                                                                      \
  template void rms_norm<T>(const T*, const T*, T*, int, int, float, cudaStream_t);             \
  template void layer_norm<T>(const T*, const T*, const T*, T*, int, int, float, cudaStream_t); \
  template void add_rms_norm<T>(T*, const T*, const T*, T*, int, int, float, cudaStream_t);     \
  template void add_layer_norm<T>(T*, const T*, const T*, const T*, T*, int, int, float,        \
                                  cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
