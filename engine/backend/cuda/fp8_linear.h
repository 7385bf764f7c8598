// option.quantize=fp8's projections in the CUDA backend past decode sizes (kernels/fp8_linear.h):
// one step's FP8 W8A8 linear with its scratch, and the FP8 GEMM whose algorithms it chooses by
// timing (the first step of each row bucket outside graph capture). Decode-sized steps read the
// E4M3 weights in the weight-streaming GEMV instead (CudaBackend::linear).
#pragma once

#include <cstdint>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/core/error.h"
#include "kernels/activation.h"
#include "kernels/fp8_linear.h"
#include "kernels/gemm.h"
#include "kernels/quantize.h"

namespace lmx {

template <typename T>
class Fp8Linear {
 public:
  // Scratch for steps of up to `max_rows` tokens through projections of up to `max_in` input
  // columns, and of up to `max_odd_out` output rows among those whose output rows are not a
  // multiple of 16 (0: none); the GEMM shares `gemm`'s workspace (same stream).
  Fp8Linear(const kernels::cuda::GemmContext& gemm, size_t max_rows, size_t max_in,
            size_t max_odd_out)
      : fp8_(gemm.workspace(), gemm.workspace_bytes()),
        xq_(max_rows * size_t(kernels::cuda::fp8_padded(int(max_in)))),
        xs_(max_rows),
        padded_y_(max_rows * size_t(kernels::cuda::fp8_padded(int(max_odd_out)))) {}

  // y [M, L.out] = fp8 W8A8(x [M, L.in]), without the bias, in two calls: quantize (or one of
  // its fused forms) puts x's per-token E4M3 codes (rows padded with zero codes to the weight's
  // row length) and their row scales into the scratch; multiply runs the FP8 GEMM with both
  // scales in its epilogue. A projection whose output rows are not a multiple of 16 (small test
  // models) goes through padded_y_ [M, fp8_padded(out)] and a strided copy.
  void quantize(const DeviceLinear<T>& L, const T* x, int M, cudaStream_t stream) {
    check(L, M);
    kernels::cuda::quantize_rows_e4m3<T>(x, xq_.get(), xs_.get(), M, int(L.in), padded(L.in),
                                         stream);
  }

  // The same for the MLP's activation of up [M, L.in] (+ bias [L.in]), or, gated, of up [M,
  // 2 L.in] (gate | up, + bias [2 L.in]), which is never stored: the codes bias_act's or
  // bias_gated_act's output would get (kernels/quantize.h's quantize_act_rows_e4m3).
  void quantize_act(const DeviceLinear<T>& L, kernels::cuda::MlpActivation act, const T* up,
                    const T* bias, int M, cudaStream_t stream) {
    check(L, M);
    kernels::cuda::quantize_act_rows_e4m3<T>(act, up, bias, xq_.get(), xs_.get(), M, int(L.in),
                                             padded(L.in), stream);
  }

  // The same for a pre-norm block's input, never stored (kernels/quantize.h's
  // quantize_add_norm_rows_e4m3: norm.residual += norm.delta as well); false, doing nothing, where
  // that kernel does not apply.
  bool quantize_add_norm(const DeviceLinear<T>& L, const kernels::cuda::AddNorm<T>& norm, int M,
                         cudaStream_t stream) {
    check(L, M);
    return kernels::cuda::quantize_add_norm_rows_e4m3<T>(norm, xq_.get(), xs_.get(), M, int(L.in),
                                                         padded(L.in), stream);
  }

  // y [M, L.out] from the codes the last quantize* call for L wrote.
  void multiply(const DeviceLinear<T>& L, T* y, int M, cudaStream_t stream) {
    check(L, M);
    const int N = int(L.out), Np = padded(L.out);
    T* out = N == Np ? y : padded_y_.get();
    fp8_.run(xq_.get(), xs_.get(), codes(L), L.q.scales.get(), out, M, Np, padded(L.in), stream);
    if (out != y)
      LMX_CUDA_CHECK(cudaMemcpy2DAsync(y, size_t(N) * sizeof(T), out, size_t(Np) * sizeof(T),
                                       size_t(N) * sizeof(T), size_t(M), cudaMemcpyDeviceToDevice,
                                       stream));
  }

  // The E4M3 codes of an fp8 projection (kept in QuantStorage::values as bytes): fp8_padded(L.out)
  // rows of fp8_padded(L.in), zeros past L.out and L.in.
  static const uint8_t* codes(const DeviceLinear<T>& L) {
    return reinterpret_cast<const uint8_t*>(L.q.values.get());
  }

 private:
  static int padded(int64_t n) { return kernels::cuda::fp8_padded(int(n)); }
  void check(const DeviceLinear<T>& L, int M) const {
    const size_t rows = size_t(M), Np = size_t(padded(L.out));
    if (rows * size_t(padded(L.in)) > xq_.size() || rows > xs_.size() ||
        (size_t(L.out) != Np && rows * Np > padded_y_.size()))
      throw_error("internal: a {} x {} x {} fp8 step exceeds its scratch", M, L.out, L.in);
  }

  kernels::cuda::Fp8Gemm<T> fp8_;
  DeviceBuffer<uint8_t> xq_;  // [rows, in] E4M3
  DeviceBuffer<float> xs_;    // [rows]
  DeviceBuffer<T> padded_y_;  // [rows, fp8_padded(out)] of the odd-sized projections
};

}  // namespace lmx
