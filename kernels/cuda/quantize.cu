#include "kernels/quantize.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/activation.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/quantize_sources.cuh"
#include "kernels/int8_layout.h"

namespace lmx::kernels::cuda {
namespace {

using detail::ActivationOf;
using detail::AddNormOf;
using detail::block_max;
using detail::from_f;
using detail::RowsOf;
using detail::to_f;

constexpr int kThreads = 256;

// The two row formats: int8 (quant/int8.h: max 127, rounded half to even, clamped; stored in
// kernels/int8_layout.h's order) and E4M3 (quant/fp8.h: max 448, cvt.rn.satfinite, as
// kernels/kv_dtype.h's encode_e4m3; column order).
struct Int8Code {
  using Code = int8_t;
  static constexpr bool kInt8Layout = true;
  static constexpr float kMax = 127.0f;
  static __device__ Code encode(float v) { return int8_t(fminf(fmaxf(rintf(v), -kMax), kMax)); }
};
struct E4m3Code {
  using Code = uint8_t;
  static constexpr bool kInt8Layout = false;
  static constexpr float kMax = 448.0f;
  static __device__ Code encode(float v) { return __nv_fp8_e4m3(v).__x; }
};

// Where the code of column c of a row of ld codes is stored.
template <typename F>
__device__ __forceinline__ int code_position(int c, int ld) {
  return F::kInt8Layout ? int8_position(c, ld) : c;
}

// One block a row: the row's max |v|, then each value divided by the scale; v = the source's value
// (times the column's scale, one fp32 rounding, as the CPU reference's product). q's rows are `ld`
// codes apart; codes cols..ld-1 are zeros.
template <typename F, typename Source>
__global__ void quantize_rows_kernel(Source src, const float* __restrict__ col_scale,
                                     typename F::Code* __restrict__ q, float* __restrict__ scale,
                                     int cols, int ld) {
  __shared__ float scratch[33];
  const int r = blockIdx.x;
  const auto value = [&](int c) {
    return col_scale ? __fmul_rn(src.value(r, c), col_scale[c]) : src.value(r, c);
  };
  float m = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, fabsf(value(c)));
  m = block_max(m, scratch);
  const float s = __fdiv_rn(m, F::kMax);  // IEEE division, as the CPU reference's
  if (threadIdx.x == 0) scale[r] = s;
  typename F::Code* out = q + size_t(r) * ld;
  for (int c = threadIdx.x; c < ld; c += kThreads)
    out[code_position<F>(c, ld)] =
        s > 0.0f && c < cols ? F::encode(__fdiv_rn(value(c), s)) : typename F::Code(0);
}

// The same for 16-bit T, cols % 8 == 0, 16-byte aligned rows and column scales, with the row read
// once: a block a row of threads that hold it in up to kHeldVecs 16-byte pieces each (8 values;
// piece j = thread + i x blockDim.x) from the max to the codes, 8 codes stored at once: as
// floats (their columns' scales applied once) when a thread holds at most kFloatVecs pieces, else
// as read (4 registers a piece, not 8; widened again for the codes). Same arithmetic, same codes
// as quantize_rows_kernel, which reads x twice with 2-byte loads (this is the per-token
// quantization of smoothquant's and fp8's activations at every prefill and batched decode step).
// Long rows take blocks of a few warps, so that an SM works on several rows at once (the launch
// below).
constexpr int kHeldMaxThreads = 512;
constexpr int kFloatVecs = 2;
template <typename T, typename F, int kHeldVecs, typename Source>
__global__ void __launch_bounds__(kHeldMaxThreads)
    quantize_rows_held_kernel(Source src, const float* __restrict__ col_scale,
                              typename F::Code* __restrict__ q, float* __restrict__ scale, int cols,
                              int ld) {
  __shared__ float scratch[33];
  const int vecs = cols / 8;
  const float4* col_scales = reinterpret_cast<const float4*>(col_scale);
  constexpr bool kFloats = kHeldVecs <= kFloatVecs;
  uint4 raw[kHeldVecs];
  float held[kFloats ? kHeldVecs : 1][8];
#pragma unroll
  for (int i = 0; i < kHeldVecs; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    raw[i] = j < vecs ? src.piece(blockIdx.x, j) : make_uint4(0u, 0u, 0u, 0u);
  }
  src.template finish<kHeldVecs>(raw, scratch);
  // The 8 values of piece i (j = its index in the row, < vecs), times their columns' scales.
  const auto values = [&](int i, int j, float (&v)[8]) {
    const T* e = reinterpret_cast<const T*>(&raw[i]);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = to_f(e[k]);
    if (col_scale) {
      const float4 lo = col_scales[2 * j], hi = col_scales[2 * j + 1];
      const float c[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = __fmul_rn(v[k], c[k]);
    }
  };
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < kHeldVecs; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j >= vecs) break;
    float v[8];
    values(i, j, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      m = fmaxf(m, fabsf(v[k]));
      if constexpr (kFloats) held[i][k] = v[k];
    }
  }
  m = block_max(m, scratch);
  const float s = __fdiv_rn(m, F::kMax);
  if (threadIdx.x == 0) scale[blockIdx.x] = s;
  typename F::Code* out = q + size_t(blockIdx.x) * ld;
  // A whole group of 16 of kernels/int8_layout.h is pieces 2g and 2g + 1: neighbouring lanes.
  const int whole_groups_end = cols - cols % kInt8LayoutGroup;
#pragma unroll
  for (int i = 0; i < kHeldVecs; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    const bool valid = j < vecs;  // no early exit for int8: its lanes trade halves below
    if constexpr (!F::kInt8Layout)
      if (!valid) break;
    union {
      typename F::Code c[8];
      uint2 u;
    } codes;
    codes.u = make_uint2(0u, 0u);
    if (valid && s > 0.0f) {
      float v[8];
      if constexpr (kFloats) {
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = held[i][k];
      } else {
        values(i, j, v);
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) codes.c[k] = F::encode(__fdiv_rn(v[k], s));
    }
    uint2 stored = codes.u;
    if constexpr (F::kInt8Layout) {
      // Columns 0-7 of a group (even lane: x = 0-3, y = 4-7) and 8-15 (odd lane) become the
      // stored words 0 1 8 9 | 2 3 10 11 (even lane's 8 bytes) and 4 5 12 13 | 6 7 14 15 (odd's).
      const bool odd = j % 2;
      const uint32_t theirs = __shfl_xor_sync(0xffffffffu, odd ? codes.u.x : codes.u.y, 1);
      const uint32_t low = odd ? theirs : codes.u.x, high = odd ? codes.u.y : theirs;
      if (16 * (j / 2) + 16 <= whole_groups_end)
        stored = make_uint2(__byte_perm(low, high, 0x5410), __byte_perm(low, high, 0x7632));
    }
    if (valid) *reinterpret_cast<uint2*>(out + 8 * j) = stored;
  }
  for (int c = cols + threadIdx.x; c < ld; c += blockDim.x) out[c] = typename F::Code(0);
}

// Threads of the held kernel for a row of `vecs` pieces, `per_thread` pieces each: whole warps.
int held_threads(int vecs, int per_thread) {
  return 32 * ((vecs + 32 * per_thread - 1) / (32 * per_thread));
}

// Whether the held kernel takes src's rows of `cols` values into codes rows of `ld` with
// `threads` threads: rows of whole 16-byte pieces, every pointer aligned to them (common.cuh's
// vec_ok), 8-byte code stores, no more threads than its bound. (int8 rows padded past cols take
// the general kernel: the padding's zeros belong inside the last group of the layout,
// kernels/int8_layout.h, where the held kernel's zero fill would not put them.)
template <typename T, typename F, typename Source>
bool held_fits(const Source& src, const void* q, const float* col_scale, int cols, int ld,
               int threads) {
  return src.aligned() && detail::vec_ok(cols, sizeof(T), {q, col_scale}) && ld % 8 == 0 &&
         threads <= kHeldMaxThreads && (!F::kInt8Layout || ld == cols);
}

// One launch of the row quantizer: the register-held kernel where it applies, else the general one.
template <typename T, typename F, typename Source>
void launch_quantize_rows(const Source& src, const float* col_scale, typename F::Code* q,
                          float* scale, int rows, int cols, int ld, cudaStream_t stream) {
  const int vecs = cols / 8;
  const auto threads_for = [&](int per_thread) { return held_threads(vecs, per_thread); };
  // Rows of up to 4096 columns: 2 pieces a thread (few registers, many blocks an SM). Longer
  // ones: up to 8 (64 registers), so that a block is a few warps, halved while the rows are too
  // few to fill the GPU with threads. Measured (H100, bench/RESULTS.md): 4096 x 11008 fp16 to
  // int8 in 71-78 us, 143-155 as 1024-thread blocks of 2 pieces; 4096 x 4096 in 64-thread blocks
  // of 8 pieces no faster for int8 and 4-10% slower for E4M3 than in 256 threads of 2.
  constexpr int kShortVecs = kFloatVecs, kLongVecs = 8;
  constexpr long kFillThreads = 128 * 1024;  // about one H100's (132 SMs x 2048) in flight
  const bool short_rows = vecs <= 256 * kShortVecs;
  int per_thread = short_rows ? kShortVecs : kLongVecs;
  while (!short_rows && per_thread > 1 && long(rows) * threads_for(per_thread) < kFillThreads &&
         threads_for(per_thread / 2) <= kHeldMaxThreads)
    per_thread /= 2;
  const int threads = threads_for(per_thread);
  const bool held = held_fits<T, F>(src, q, col_scale, cols, ld, threads);
  if constexpr (sizeof(T) == 2) {  // 16-byte pieces of 8 values
    if (held) {
      if (short_rows)
        quantize_rows_held_kernel<T, F, kShortVecs>
            <<<rows, threads, 0, stream>>>(src, col_scale, q, scale, cols, ld);
      else
        quantize_rows_held_kernel<T, F, kLongVecs>
            <<<rows, threads, 0, stream>>>(src, col_scale, q, scale, cols, ld);
      return;
    }
  }
  quantize_rows_kernel<F><<<rows, kThreads, 0, stream>>>(src, col_scale, q, scale, cols, ld);
}

// Grid-stride over out [rows, cols] (q in kernels/int8_layout.h's order): any cols.
template <typename T>
__global__ void dequantize_rows_kernel(const int8_t* __restrict__ q,
                                       const float* __restrict__ scale, T* __restrict__ out,
                                       size_t n, int cols) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / cols;
    const int c = int(i - row * cols);
    out[i] = from_f<T>(float(q[row * cols + int8_position(c, cols)]) * scale[row]);
  }
}

// The same for cols % 16 == 0, a thread a group of 16 codes (one 16-byte load, put back in
// column order in registers, 16 values stored with 16-byte stores; q and out 16-byte aligned).
template <typename T>
__global__ void dequantize_groups_kernel(const uint4* __restrict__ q,
                                         const float* __restrict__ scale, T* __restrict__ out,
                                         size_t groups, int groups_per_row) {
  constexpr int kGroup = kInt8LayoutGroup;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < groups;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint4 raw = q[i];
    const auto* codes = reinterpret_cast<const int8_t*>(&raw);
    const float s = scale[i / groups_per_row];
    union {
      T v[kGroup];
      uint4 chunks[kGroup * sizeof(T) / 16];
    } values;
#pragma unroll
    for (int k = 0; k < kGroup; ++k)
      values.v[k] = from_f<T>(float(codes[int8_position(k, kGroup)]) * s);
    auto* to = reinterpret_cast<uint4*>(out + i * kGroup);
#pragma unroll
    for (int c = 0; c < int(kGroup * sizeof(T) / 16); ++c) to[c] = values.chunks[c];
  }
}

// Grid-stride over codes [rows, ld].
template <typename T>
__global__ void encode_rows_kernel(const T* __restrict__ x, uint8_t* __restrict__ codes, size_t n,
                                   int cols, int ld) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / size_t(ld);
    const int c = int(i - r * size_t(ld));
    codes[i] = c < cols ? E4m3Code::encode(to_f(x[r * size_t(cols) + size_t(c)])) : uint8_t(0);
  }
}

}  // namespace

template <typename T>
void encode_rows_e4m3(const T* x, uint8_t* codes, int rows, int cols, int codes_ld,
                      cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (codes_ld < cols)
    throw std::invalid_argument("encode_rows_e4m3: codes_ld " + std::to_string(codes_ld) +
                                " < cols " + std::to_string(cols));
  const size_t n = size_t(rows) * size_t(codes_ld);
  const int blocks = int(std::min<size_t>((n + kThreads - 1) / kThreads, 132 * 16));
  encode_rows_kernel<T><<<blocks, kThreads, 0, stream>>>(x, codes, n, cols, codes_ld);
}

template <typename T>
void quantize_rows_int8(const T* w, const float* col_scale, int8_t* q, float* scale, int rows,
                        int cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  launch_quantize_rows<T, Int8Code>(RowsOf<T>{w, cols}, col_scale, q, scale, rows, cols, cols,
                                    stream);
}

template <typename T>
void quantize_rows_int8(const T* w, const float* col_scale, int8_t* q, float* scale, int rows,
                        int cols, int q_ld, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (q_ld < cols)
    throw std::invalid_argument("quantize_rows_int8: q_ld " + std::to_string(q_ld) + " < cols " +
                                std::to_string(cols));
  launch_quantize_rows<T, Int8Code>(RowsOf<T>{w, cols}, col_scale, q, scale, rows, cols, q_ld,
                                    stream);
}

template <typename T>
void quantize_rows_e4m3(const T* x, uint8_t* codes, float* scale, int rows, int cols, int codes_ld,
                        cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (codes_ld < cols)
    throw std::invalid_argument("quantize_rows_e4m3: codes_ld " + std::to_string(codes_ld) +
                                " < cols " + std::to_string(cols));
  launch_quantize_rows<T, E4m3Code>(RowsOf<T>{x, cols}, nullptr, codes, scale, rows, cols,
                                    codes_ld, stream);
}

// The activation's rows (ActivationOf) through format F's quantizer.
template <typename T, typename F>
void quantize_act_rows(MlpActivation act, const T* in, const T* bias, const float* col_scale,
                       typename F::Code* q, float* scale, int rows, int cols, int ld,
                       cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (ld < cols)
    throw std::invalid_argument("quantize_act_rows: ld " + std::to_string(ld) + " < cols " +
                                std::to_string(cols));
  detail::with_activation(act.kind, [&](auto k) {
    constexpr ActivationKind K = decltype(k)::value;
    if (act.gated)
      launch_quantize_rows<T, F>(ActivationOf<T, K, true>{in, bias, cols}, col_scale, q, scale,
                                 rows, cols, ld, stream);
    else
      launch_quantize_rows<T, F>(ActivationOf<T, K, false>{in, bias, cols}, col_scale, q, scale,
                                 rows, cols, ld, stream);
  });
}

// AddNormOf's rows through format F's held quantizer, with add_norm_kernel's threads and pieces a
// thread (kernels/cuda/norm.cu's launch_cached for 16-byte packs: one a thread up to 512 packs,
// then two), or false.
template <typename T, typename F>
bool quantize_add_norm_rows(const AddNorm<T>& norm, const float* col_scale, typename F::Code* q,
                            float* scale, int rows, int cols, int ld, cudaStream_t stream) {
  if constexpr (sizeof(T) != 2) {
    return false;
  } else {
    const int vecs = cols / 8;
    const int per_thread = vecs <= 512 ? 1 : 2;
    const int threads = held_threads(vecs, per_thread);
    const AddNormOf<T> src{norm, cols};
    if (ld < cols || !held_fits<T, F>(src, q, col_scale, cols, ld, threads) ||
        (norm.layer_norm && norm.bias == nullptr))
      return false;
    if (rows <= 0 || cols <= 0) return true;
    if (per_thread == 1)
      quantize_rows_held_kernel<T, F, 1><<<rows, threads, 0, stream>>>(src, col_scale, q, scale,
                                                                       cols, ld);
    else
      quantize_rows_held_kernel<T, F, 2><<<rows, threads, 0, stream>>>(src, col_scale, q, scale,
                                                                       cols, ld);
    return true;
  }
}

template <typename T>
bool quantize_add_norm_rows_int8(const AddNorm<T>& norm, const float* col_scale, int8_t* q,
                                 float* scale, int rows, int cols, int q_ld, cudaStream_t stream) {
  return quantize_add_norm_rows<T, Int8Code>(norm, col_scale, q, scale, rows, cols, q_ld, stream);
}

template <typename T>
bool quantize_add_norm_rows_e4m3(const AddNorm<T>& norm, uint8_t* codes, float* scale, int rows,
                                 int cols, int codes_ld, cudaStream_t stream) {
  return quantize_add_norm_rows<T, E4m3Code>(norm, nullptr, codes, scale, rows, cols, codes_ld,
                                             stream);
}

template <typename T>
void quantize_act_rows_int8(MlpActivation act, const T* in, const T* bias, const float* col_scale,
                            int8_t* q, float* scale, int rows, int cols, int q_ld,
                            cudaStream_t stream) {
  quantize_act_rows<T, Int8Code>(act, in, bias, col_scale, q, scale, rows, cols, q_ld, stream);
}

template <typename T>
void quantize_act_rows_e4m3(MlpActivation act, const T* in, const T* bias, uint8_t* codes,
                            float* scale, int rows, int cols, int codes_ld, cudaStream_t stream) {
  quantize_act_rows<T, E4m3Code>(act, in, bias, nullptr, codes, scale, rows, cols, codes_ld,
                                 stream);
}

template <typename T>
void dequantize_rows_int8(const int8_t* q, const float* scale, T* out, int rows, int cols,
                          cudaStream_t stream) {
  const size_t n = size_t(rows) * cols;
  if (n == 0) return;
  const auto grid = [](size_t items) {
    return int(std::min<size_t>((items + kThreads - 1) / kThreads, 132 * 16));
  };
  // Rows of whole layout groups (a 16-byte pack of codes is one group), q and out aligned.
  static_assert(kInt8LayoutGroup == 16);
  if (detail::vec_ok(cols, sizeof(int8_t), {q, out})) {
    const size_t groups = n / kInt8LayoutGroup;
    dequantize_groups_kernel<T><<<grid(groups), kThreads, 0, stream>>>(
        reinterpret_cast<const uint4*>(q), scale, out, groups, cols / kInt8LayoutGroup);
    return;
  }
  dequantize_rows_kernel<T><<<grid(n), kThreads, 0, stream>>>(q, scale, out, n, cols);
}

#define LMX_INSTANTIATE(T)                                                                        \
  template void quantize_rows_int8<T>(const T*, const float*, int8_t*, float*, int, int,          \
                                      cudaStream_t);                                              \
  template void quantize_rows_int8<T>(const T*, const float*, int8_t*, float*, int, int, int,     \
                                      cudaStream_t);                                              \
  template void dequantize_rows_int8<T>(const int8_t*, const float*, T*, int, int, cudaStream_t); \
  template void quantize_rows_e4m3<T>(const T*, uint8_t*, float*, int, int, int, cudaStream_t);   \
  template void encode_rows_e4m3<T>(const T*, uint8_t*, int, int, int, cudaStream_t);         \
  template void quantize_act_rows_int8<T>(MlpActivation, const T*, const T*, const float*,       \
                                          int8_t*, float*, int, int, int, cudaStream_t);          \
  template void quantize_act_rows_e4m3<T>(MlpActivation, const T*, const T*, uint8_t*, float*,    \
                                          int, int, int, cudaStream_t);                           \
  template bool quantize_add_norm_rows_int8<T>(const AddNorm<T>&, const float*, int8_t*, float*,  \
                                               int, int, int, cudaStream_t);                      \
  template bool quantize_add_norm_rows_e4m3<T>(const AddNorm<T>&, uint8_t*, float*, int, int, int, \
                                               cudaStream_t);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx::kernels::cuda
