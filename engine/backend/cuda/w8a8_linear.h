// smoothquant's projections in the CUDA backend (kernels/w8a8.h): one step's W8A8 linear with its
// scratch, and the W8A8 GEMM whose form and algorithms it chooses by timing (the first step of
// each row bucket outside graph capture).
#pragma once

#include <cstdint>

#include "engine/backend/cuda/device_weights.h"
#include "engine/core/error.h"
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

  // y [M, L.out] = W8A8(x [M, L.in]), without the bias: x quantized per token (times L's 1/s when
  // its smoothing is not in a norm) into rows of w8a8_padded(L.in) codes (the weight's: zeros
  // past L.in), then the int8 GEMM with the scales back to T.
  void run(const DeviceLinear<T>& L, const T* x, T* y, int M, cudaStream_t stream) {
    namespace k = kernels::cuda;
    const int N = int(L.out), K = int(L.in), Kp = kernels::cuda::w8a8_padded(K);
    if (size_t(M) * size_t(Kp) > xq_.size() || size_t(M) * size_t(N) > acc_.size())
      throw_error("internal: a {} x {} x {} W8A8 step exceeds its scratch", M, N, K);
    k::quantize_rows_int8<T>(x, L.q.inv_smooth.empty() ? nullptr : L.q.inv_smooth.get(),
                             xq_.get(), xs_.get(), M, K, Kp, stream);
    gemm_.run(xq_.get(), L.q.values.get(), xs_.get(), L.q.scales.get(), acc_.get(), y, M, N, Kp,
              stream);
  }

 private:
  kernels::cuda::W8A8Gemm<T> gemm_;
  DeviceBuffer<int8_t> xq_;   // [rows, in]
  DeviceBuffer<float> xs_;    // [rows]
  DeviceBuffer<int32_t> acc_;  // [rows, out]
};

}  // namespace lmx
