// smoothquant's projections in the CUDA backend (kernels/w8a8.h): one step's W8A8 linear with its
// scratch, and the W8A8 GEMM whose form and algorithms it chooses by timing (the first step of
// each row bucket outside graph capture).
#pragma once

#include <cstdint>

#include "engine/backend/cuda/device_weights.h"
#include "engine/core/error.h"
#include "kernels/activation.h"
#include "kernels/gemm.h"
#include "kernels/quantize.h"
#include "kernels/w8a8.h"

namespace lmx {

template <typename T>
class W8A8Linear {
 public:
  // Scratch for steps of up to `max_rows` tokens through projections of up to `max_in` input and
  // `max_out` output columns; the GEMM shares `gemm`'s workspace (same stream).
  W8A8Linear(const kernels::cuda::GemmContext& gemm, size_t max_rows, size_t max_in, size_t max_out)
      : gemm_(gemm.workspace(), gemm.workspace_bytes()),
        xq_(max_rows * size_t(kernels::cuda::w8a8_padded(int(max_in)))),
        xs_(max_rows),
        acc_(max_rows * max_out) {}

  // y [M, L.out] = W8A8(x [M, L.in]), without the bias, in two calls: quantize (or one of its
  // fused forms) puts x's per-token codes (times L's 1/s when its smoothing is not in a norm) in
  // rows of w8a8_padded(L.in) (the weight's: zeros past L.in) and their row scales into the
  // scratch; multiply runs the int8 GEMM with the scales back to T.
  void quantize(const DeviceLinear<T>& L, const T* x, int M, cudaStream_t stream) {
    check(L, M);
    kernels::cuda::quantize_rows_int8<T>(x, inv_smooth(L), xq_.get(), xs_.get(), M, int(L.in),
                                         padded_in(L), stream);
  }

  // The same for the MLP's activation of up [M, L.in] (+ bias [L.in]), or, gated, of up [M,
  // 2 L.in] (gate | up, + bias [2 L.in]), which is never stored: the codes bias_act's or
  // bias_gated_act's output would get (kernels/quantize.h's quantize_act_rows_int8).
  void quantize_act(const DeviceLinear<T>& L, kernels::cuda::MlpActivation act, const T* up,
                    const T* bias, int M, cudaStream_t stream) {
    check(L, M);
    kernels::cuda::quantize_act_rows_int8<T>(act, up, bias, inv_smooth(L), xq_.get(), xs_.get(), M,
                                             int(L.in), padded_in(L), stream);
  }

  // The same for a pre-norm block's input, never stored (kernels/quantize.h's
  // quantize_add_norm_rows_int8: norm.residual += norm.delta as well); false, doing nothing, where
  // that kernel does not apply.
  bool quantize_add_norm(const DeviceLinear<T>& L, const kernels::cuda::AddNorm<T>& norm, int M,
                         cudaStream_t stream) {
    check(L, M);
    return kernels::cuda::quantize_add_norm_rows_int8<T>(norm, inv_smooth(L), xq_.get(), xs_.get(),
                                                         M, int(L.in), padded_in(L), stream);
  }

  // y [M, L.out] from the codes the last quantize* call for L wrote.
  void multiply(const DeviceLinear<T>& L, T* y, int M, cudaStream_t stream) {
    check(L, M);
    gemm_.run(xq_.get(), L.q.values.get(), xs_.get(), L.q.scales.get(), acc_.get(), y, M,
              int(L.out), padded_in(L), stream);
  }

 private:
  static int padded_in(const DeviceLinear<T>& L) { return kernels::cuda::w8a8_padded(int(L.in)); }
  static const float* inv_smooth(const DeviceLinear<T>& L) {
    return L.q.inv_smooth.empty() ? nullptr : L.q.inv_smooth.get();
  }
  void check(const DeviceLinear<T>& L, int M) const {
    if (size_t(M) * size_t(padded_in(L)) > xq_.size() || size_t(M) * size_t(L.out) > acc_.size())
      throw_error("internal: a {} x {} x {} W8A8 step exceeds its scratch", M, L.out, L.in);
  }

  kernels::cuda::W8A8Gemm<T> gemm_;
  DeviceBuffer<int8_t> xq_;   // [rows, in]
  DeviceBuffer<float> xs_;    // [rows]
  DeviceBuffer<int32_t> acc_;  // [rows, out]
};

}  // namespace lmx
