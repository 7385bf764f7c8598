#include "kernels/activation.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"

namespace lmx::kernels::cuda {
namespace {

using namespace detail;

// Grid-stride over packs of the output [tokens, inter]. GATED: in is [tokens, 2 * inter].
template <typename T, int N, ActivationKind K, bool GATED>
__global__ void act_kernel(const T* in, const T* __restrict__ bias, T* out, size_t packs,
                           int inter_packs) {
  pdl::wait_for_primary();
  pdl::allow_dependents();  // the down projection may start streaming its weights
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < packs;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t t = i / inter_packs;
    const int c = int(i - t * inter_packs);
    const size_t src = GATED ? t * 2 * inter_packs + c : i;
    const Pack<T, N> g = load<T, N>(in, src);
    float f[N];
#pragma unroll
    for (int j = 0; j < N; ++j) f[j] = to_f(g.v[j]);
    if (bias) {
      const Pack<T, N> b = load<T, N>(bias, c);
#pragma unroll
      for (int j = 0; j < N; ++j) f[j] += to_f(b.v[j]);
    }
#pragma unroll
    for (int j = 0; j < N; ++j) f[j] = activate<K>(f[j]);
    if (GATED) {  // f = act(gate + gate_bias) * (up + up_bias)
      const Pack<T, N> u = load<T, N>(in, src + inter_packs);
      float up[N];
#pragma unroll
      for (int j = 0; j < N; ++j) up[j] = to_f(u.v[j]);
      if (bias) {
        const Pack<T, N> bu = load<T, N>(bias, c + inter_packs);
#pragma unroll
        for (int j = 0; j < N; ++j) up[j] += to_f(bu.v[j]);
      }
#pragma unroll
      for (int j = 0; j < N; ++j) f[j] *= up[j];
    }
    Pack<T, N> o;
#pragma unroll
    for (int j = 0; j < N; ++j) o.v[j] = from_f<T>(f[j]);
    store<T, N>(out, i, o);
  }
}

template <typename T, int N, bool GATED>
void launch_kind(ActivationKind kind, const T* in, const T* bias, T* out, size_t packs,
                 int inter_packs, cudaStream_t stream) {
  constexpr int threads = 256;
  const int blocks = int(std::min<size_t>((packs + threads - 1) / threads, 132 * 16));
  auto go = [&](auto kernel) {
    pdl::launch_dependent(kernel, dim3(blocks), dim3(threads), 0, stream, in, bias, out, packs,
                          inter_packs);
  };
  with_activation(kind, [&](auto k) { go(act_kernel<T, N, decltype(k)::value, GATED>); });
}

template <typename T, bool GATED>
void launch(ActivationKind kind, const T* in, const T* bias, T* out, int tokens, int inter,
            cudaStream_t stream) {
  const size_t n = size_t(tokens) * inter;
  if (n == 0) return;
  constexpr int V = kVec<T>;
  if (vec_ok(inter, sizeof(T), {in, bias, out}))
    launch_kind<T, V, GATED>(kind, in, bias, out, n / V, inter / V, stream);
  else
    launch_kind<T, 1, GATED>(kind, in, bias, out, n, inter, stream);
}

}  // namespace

template <typename T>
void gated_act(ActivationKind kind, const T* in, T* out, int tokens, int inter,
               cudaStream_t stream) {
  launch<T, true>(kind, in, nullptr, out, tokens, inter, stream);
}
template <typename T>
void act(ActivationKind kind, const T* in, T* out, int tokens, int inter, cudaStream_t stream) {
  launch<T, false>(kind, in, nullptr, out, tokens, inter, stream);
}
template <typename T>
void bias_gated_act(ActivationKind kind, const T* in, const T* bias, T* out, int tokens, int inter,
                    cudaStream_t stream) {
  launch<T, true>(kind, in, bias, out, tokens, inter, stream);
}
template <typename T>
void bias_act(ActivationKind kind, const T* in, const T* bias, T* out, int tokens, int inter,
              cudaStream_t stream) {
  launch<T, false>(kind, in, bias, out, tokens, inter, stream);
}

#define LMX_INSTANTIATE(T)                                                                      \
  template void gated_act<T>(ActivationKind, const T*, T*, int, int, cudaStream_t);             \
  template void act<T>(ActivationKind, const T*, T*, int, int, cudaStream_t);                   \
  template void bias_gated_act<T>(ActivationKind, const T*, const T*, T*, int, int,             \
                                  cudaStream_t);                                                \
  template void bias_act<T>(ActivationKind, const T*, const T*, T*, int, int, cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
