// option.quantize=fp8's projections in the CUDA backend past decode sizes (kernels/fp8_linear.h):
// one step's FP8 W8A8 linear with its scratch, and the FP8 GEMM whose algorithms it chooses by
// timing (the first step of each row bucket outside graph capture). Decode-sized steps read the
// E4M3 weights in the weight-streaming GEMV instead (CudaBackend::linear).
#pragma once

#include <cstdint>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/core/error.h"
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

  // y [M, L.out] = fp8 W8A8(x [M, L.in]), without the bias: x quantized to E4M3 per token (rows
  // padded with zero codes to the weight's row length), then the FP8 GEMM with both scales in
  // its epilogue. A projection whose output rows are not a multiple of 16 (small test models)
  // goes through padded_y_ [M, fp8_padded(out)] and a strided copy.
  void run(const DeviceLinear<T>& L, const T* x, T* y, int M, cudaStream_t stream) {
    namespace k = kernels::cuda;
    const int N = int(L.out), K = int(L.in), Np = k::fp8_padded(N), Kp = k::fp8_padded(K);
    if (size_t(M) * size_t(Kp) > xq_.size() || size_t(M) > xs_.size() ||
        (N != Np && size_t(M) * size_t(Np) > padded_y_.size()))
      throw_error("internal: a {} x {} x {} fp8 step exceeds its scratch", M, N, K);
    k::quantize_rows_e4m3<T>(x, xq_.get(), xs_.get(), M, K, Kp, stream);
    T* out = N == Np ? y : padded_y_.get();
    fp8_.run(xq_.get(), xs_.get(), codes(L), L.q.scales.get(), out, M, Np, Kp, stream);
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
  kernels::cuda::Fp8Gemm<T> fp8_;
  DeviceBuffer<uint8_t> xq_;  // [rows, in] E4M3
  DeviceBuffer<float> xs_;    // [rows]
  DeviceBuffer<T> padded_y_;  // [rows, fp8_padded(out)] of the odd-sized projections
};

}  // namespace lmx
