// The row sources of the activation quantizers (kernels/cuda/quantize.cu): x itself, an MLP's
// activation, and a pre-norm block's normalized residual, each value as the kernel that would
// store it computes it. A source gives element c of row r (value, for the general kernel) and
// 16-byte piece j of the row (piece, 16-bit T: 8 values packed as T), says whether its pointers
// allow pieces (aligned), and may finish the pieces a block holds in place once it holds the
// whole row (finish: the norm's factors).
#pragma once

#include <cstddef>

#include "kernels/activation.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm_rows.cuh"
#include "kernels/quantize.h"

namespace lmx::kernels::cuda::detail {

// x [rows, cols] itself.
template <typename T>
struct RowsOf {
  const T* x;
  int cols;
  __device__ float value(int r, int c) const { return to_f(x[size_t(r) * cols + c]); }
  __device__ uint4 piece(int r, int j) const {
    return reinterpret_cast<const uint4*>(x + size_t(r) * cols)[j];
  }
  bool aligned() const { return vec_ok(cols, sizeof(T), {x}); }
  template <int kHeld>
  __device__ void finish(uint4 (&)[kHeld], float*) const {}
};

// An MLP's activation, never stored: act(in[r, c] + bias[c]) of in [rows, cols] and bias [cols]
// or null, or, gated, act(in[r, c] + bias[c]) * (in[r, cols + c] + bias[cols + c]) of in [rows,
// 2 cols] (gate | up) and bias [2 cols] or null; in fp32 and rounded once to T: the arithmetic
// and the values of the activation kernels (kernels/cuda/activation.cu's act_kernel), so the
// codes equal those of bias_act / bias_gated_act followed by the quantizer.
template <typename T, ActivationKind K, bool kGated>
struct ActivationOf {
  const T* in;
  const T* bias;
  int cols;
  static constexpr int kWidths = kGated ? 2 : 1;  // in's row: cols, or gate and up
  // f(gate [+ bias]) [x (up [+ bias])] from the values as T holds them, in fp32.
  __device__ float activated(T gate, T up, T gate_bias, T up_bias) const {
    float f = to_f(gate);
    if (bias) f += to_f(gate_bias);
    f = activate<K>(f);
    if constexpr (kGated) f *= bias ? to_f(up) + to_f(up_bias) : to_f(up);
    return f;
  }
  __device__ float value(int r, int c) const {
    const T* row = in + size_t(r) * kWidths * cols;
    const T zero = from_f<T>(0.0f);
    const T up = kGated ? row[cols + c] : zero;
    const T gate_bias = bias ? bias[c] : zero, up_bias = kGated && bias ? bias[cols + c] : zero;
    return to_f(from_f<T>(activated(row[c], up, gate_bias, up_bias)));
  }
  __device__ uint4 piece(int r, int j) const {
    const int vecs = cols / 8;
    const uint4* row = reinterpret_cast<const uint4*>(in + size_t(r) * kWidths * cols);
    const uint4* b = reinterpret_cast<const uint4*>(bias);
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    const uint4 g = row[j], u = kGated ? row[vecs + j] : zero;
    const uint4 bg = bias ? b[j] : zero, bu = kGated && bias ? b[vecs + j] : zero;
    const T* gv = reinterpret_cast<const T*>(&g);
    const T* uv = reinterpret_cast<const T*>(&u);
    const T* bgv = reinterpret_cast<const T*>(&bg);
    const T* buv = reinterpret_cast<const T*>(&bu);
    union {
      T v[8];
      uint4 packed;
    } out;
#pragma unroll
    for (int k = 0; k < 8; ++k) out.v[k] = from_f<T>(activated(gv[k], uv[k], bgv[k], buv[k]));
    return out.packed;
  }
  bool aligned() const { return vec_ok(cols, sizeof(T), {in, bias}); }
  template <int kHeld>
  __device__ void finish(uint4 (&)[kHeld], float*) const {}
};

// A pre-norm decoder block's input, never stored (kernels/quantize.h's AddNorm): piece j is the
// residual's plus delta's, rounded to T and written back to the residual (the residual itself
// without delta); once the block holds its row, finish() normalizes the pieces in place (RMSNorm,
// or LayerNorm from the mean and the biased variance), times the weight (plus the bias), each
// value rounded to T. Launched with add_norm_kernel's threads and pieces a thread
// (kernels/cuda/norm.cu), the sums run in the same order, so the values equal add_rms_norm's /
// add_layer_norm's output bit for bit. Held-kernel source only (no value()).
template <typename T>
struct AddNormOf {
  AddNorm<T> norm;
  int cols;
  bool aligned() const {
    return vec_ok(cols, sizeof(T), {norm.residual, norm.delta, norm.weight, norm.bias});
  }
  __device__ uint4 piece(int r, int j) const {
    uint4 a = reinterpret_cast<const uint4*>(norm.residual + size_t(r) * cols)[j];
    if (norm.delta) {
      const uint4 d = reinterpret_cast<const uint4*>(norm.delta + size_t(r) * cols)[j];
      T* av = reinterpret_cast<T*>(&a);
      const T* dv = reinterpret_cast<const T*>(&d);
#pragma unroll
      for (int k = 0; k < 8; ++k) av[k] = from_f<T>(to_f(av[k]) + to_f(dv[k]));
      reinterpret_cast<uint4*>(norm.residual + size_t(r) * cols)[j] = a;
    }
    return a;
  }
  template <int kHeld>
  __device__ void finish(uint4 (&raw)[kHeld], float* scratch) const {
    const int vecs = cols / 8;
    const auto values = [&](int i) { return reinterpret_cast<T*>(&raw[i]); };
    const float2 f = norm_factors(
        norm.layer_norm,
        [&](auto&& visit) {
#pragma unroll
          for (int i = 0; i < kHeld; ++i)
            if (threadIdx.x + i * blockDim.x < vecs)
#pragma unroll
              for (int k = 0; k < 8; ++k) visit(to_f(values(i)[k]));
        },
        cols, norm.eps, scratch);
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int j = threadIdx.x + i * blockDim.x;
      if (j >= vecs) continue;
      const uint4 wp = reinterpret_cast<const uint4*>(norm.weight)[j];
      uint4 bp = make_uint4(0u, 0u, 0u, 0u);
      if (norm.layer_norm) bp = reinterpret_cast<const uint4*>(norm.bias)[j];
      const T* w = reinterpret_cast<const T*>(&wp);
      const T* b = reinterpret_cast<const T*>(&bp);
      T* v = values(i);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        v[k] = from_f<T>(normalized(norm.layer_norm, to_f(v[k]), f, to_f(w[k]), to_f(b[k])));
    }
  }
};

}  // namespace lmx::kernels::cuda::detail
