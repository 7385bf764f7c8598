// Skinny linear for decode: y[M, N] = x[M, K] · w[N, K]^T with M <= 8 rows, T = __half or
// __nv_bfloat16, fp32 accumulation. Decode is bound by streaming the weights once: one warp per
// output column n reads w's row with 16-byte loads (8 elements a lane, two loads in flight) and
// keeps M partial sums; x (M x K, small) is read through L1. Requires K % 8 == 0 and 16-byte
// aligned rows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/gemm.h"

namespace lmx::kernels::cuda {
namespace {

constexpr int kWarps = 8;

template <typename T>
__device__ __forceinline__ void to_float8(const uint4& v, float (&f)[8]) {
  const T* h = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = float(h[i]);
}

template <typename T, int M, typename Out>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, Out* __restrict__ y, int N, int K) {
  const int n = blockIdx.x * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= N) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w + size_t(n) * K);
  const int chunks = K / 8;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  int c = lane;
  for (; c + 32 < chunks; c += 64) {  // two 16-byte weight loads in flight per lane
    const uint4 a = __ldg(wr + c), b = __ldg(wr + c + 32);
    float wa[8], wb[8];
    to_float8<T>(a, wa);
    to_float8<T>(b, wb);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(m) * K);
      float xa[8], xb[8];
      to_float8<T>(xr[c], xa);
      to_float8<T>(xr[c + 32], xb);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[m] += wa[i] * xa[i] + wb[i] * xb[i];
    }
  }
  for (; c < chunks; c += 32) {
    float wa[8];
    to_float8<T>(__ldg(wr + c), wa);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float xa[8];
      to_float8<T>(reinterpret_cast<const uint4*>(x + size_t(m) * K)[c], xa);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[m] += wa[i] * xa[i];
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float v = acc[m];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) y[size_t(m) * N + n] = Out(v);
  }
}

template <typename T, typename Out>
void launch(const T* x, const T* w, Out* y, int M, int N, int K, cudaStream_t stream) {
  const dim3 grid((N + kWarps - 1) / kWarps), block(kWarps * 32);
  switch (M) {
#define LMX_CASE(m) \
  case m: gemv_kernel<T, m, Out><<<grid, block, 0, stream>>>(x, w, y, N, K); break;
    LMX_CASE(1) LMX_CASE(2) LMX_CASE(3) LMX_CASE(4) LMX_CASE(5) LMX_CASE(6) LMX_CASE(7) LMX_CASE(8)
#undef LMX_CASE
  }
}

}  // namespace

bool skinny_supported(int M, int K) { return M >= 1 && M <= kSkinnyMaxRows && K % 8 == 0; }

template <typename T>
void skinny_linear(const T* x, const T* w, T* y, int M, int N, int K, cudaStream_t stream) {
  launch<T, T>(x, w, y, M, N, K, stream);
}

template <typename T>
void skinny_linear_f32_out(const T* x, const T* w, float* y, int M, int N, int K,
                           cudaStream_t stream) {
  launch<T, float>(x, w, y, M, N, K, stream);
}

template void skinny_linear<__half>(const __half*, const __half*, __half*, int, int, int, cudaStream_t);
template void skinny_linear<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                           __nv_bfloat16*, int, int, int, cudaStream_t);
template void skinny_linear_f32_out<__half>(const __half*, const __half*, float*, int, int, int,
                                            cudaStream_t);
template void skinny_linear_f32_out<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*,
                                                   float*, int, int, int, cudaStream_t);

}  // namespace lmx::kernels::cuda
