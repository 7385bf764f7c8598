// smoothquant's alpha search on the GPU (engine/backend/smoothing_scorer.h) over the unquantized
// weights of a calibration backend: each candidate s is scored with the serving path's own W8A8
// kernels (kernels/quantize.h, kernels/w8a8.h: W diag(s) quantized per output channel, x diag(1/s)
// per token, the int8 GEMM, the scaling epilogue in fp32) against x W^T from cuBLAS in fp32
// arithmetic, which is computed once per projection and set of rows. The rows arrive as fp32
// values of T (the calibration forward computed them in T), so converting them back is exact.
#pragma once

#include <functional>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/smoothing_scorer.h"
#include "engine/core/error.h"
#include "kernels/calibration.h"
#include "kernels/gemm.h"
#include "kernels/quantize.h"
#include "kernels/w8a8.h"

namespace lmx {

template <typename T>
class CudaSmoothingScorer final : public SmoothingScorer {
 public:
  // The projection `slot` of layer `layer`, as the backend holds it.
  using Projection = std::function<const DeviceLinear<T>&(int layer, LinearSlot slot)>;

  CudaSmoothingScorer(kernels::cuda::GemmContext& gemm, Projection projection, cudaStream_t stream)
      : gemm_(gemm),
        int8_(gemm.workspace(), gemm.workspace_bytes()),
        projection_(std::move(projection)),
        stream_(stream) {}

  std::vector<float> weight_column_max(int layer, LinearSlot slot) override {
    const DeviceLinear<T>& L = weights(layer, slot);
    DeviceBuffer<float> max(size_t(L.in));
    LMX_CUDA_CHECK(cudaMemsetAsync(max.get(), 0, max.bytes(), stream_));
    kernels::cuda::column_abs_max<T>(L.weight.get(), int(L.out), int(L.in), int(L.in), max.get(),
                                     stream_);
    std::vector<float> out(size_t(L.in));
    download(max.get(), out.data(), out.size());
    return out;
  }

  void set_rows(std::span<const float> x, int rows, int in) override {
    rows_.set(x.size(), rows, in);
    grow(rows_f32_, x.size());
    grow(x_, x.size());
    LMX_CUDA_CHECK(cudaMemcpyAsync(rows_f32_.get(), x.data(), x.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, stream_));
    kernels::cuda::convert<float, T>(rows_f32_.get(), x_.get(), x.size(), stream_);
  }

  ErrorSums w8a8_error(int layer, LinearSlot slot, std::span<const float> s) override {
    namespace k = kernels::cuda;
    const DeviceLinear<T>& L = weights(layer, slot);
    rows_.check_score(layer, slot, int(L.in), s.size());
    const int M = rows_.rows(), N = int(L.out), K = int(L.in), Kp = k::w8a8_padded(K);
    const size_t out = size_t(M) * size_t(N);
    grow(wq_, size_t(N) * Kp);
    grow(ws_, size_t(N));
    grow(xq_, size_t(M) * Kp);
    grow(xs_, size_t(M));
    grow(acc_, out);
    grow(y_, out);
    grow(smooth_, 2 * size_t(K));
    if (rows_.reference_stale(layer, slot)) {
      grow(ref_, out);
      k::linear_f32_out<T>(gemm_, x_.get(), {L.weight.get(), nullptr, N, K}, ref_.get(), M,
                           stream_);
    }
    std::vector<float> s_inv(2 * size_t(K));  // s, then 1 / s
    for (size_t j = 0; j < size_t(K); ++j) {
      s_inv[j] = s[j];
      s_inv[size_t(K) + j] = 1.0f / s[j];
    }
    LMX_CUDA_CHECK(cudaMemcpyAsync(smooth_.get(), s_inv.data(), s_inv.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, stream_));
    k::quantize_rows_int8<T>(L.weight.get(), smooth_.get(), wq_.get(), ws_.get(), N, K, Kp,
                             stream_);
    k::quantize_rows_int8<T>(x_.get(), smooth_.get() + K, xq_.get(), xs_.get(), M, K, Kp, stream_);
    int8_.run(xq_.get(), wq_.get(), acc_.get(), M, N, Kp, stream_);
    k::w8a8_scale_epilogue<float>(acc_.get(), xs_.get(), ws_.get(), y_.get(), M, N, stream_);
    grow(sums_, 2);
    LMX_CUDA_CHECK(cudaMemsetAsync(sums_.get(), 0, sums_.bytes(), stream_));
    k::squared_error_sums(y_.get(), ref_.get(), out, sums_.get(), stream_);
    double sums[2];
    download(sums_.get(), sums, 2);
    return {sums[0], sums[1]};
  }

 private:
  const DeviceLinear<T>& weights(int layer, LinearSlot slot) const {
    const DeviceLinear<T>& L = projection_(layer, slot);
    if (L.weight.empty() || !L.q.values.empty())
      throw_error("alpha search: layer {} projection {} is not held unquantized", layer, int(slot));
    return L;
  }

  template <typename U>
  static void grow(DeviceBuffer<U>& b, size_t count) {
    if (b.size() < count) b = DeviceBuffer<U>(count);
  }

  template <typename U>
  void download(const U* device, U* host, size_t count) {
    LMX_CUDA_CHECK(
        cudaMemcpyAsync(host, device, count * sizeof(U), cudaMemcpyDeviceToHost, stream_));
    LMX_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  kernels::cuda::GemmContext& gemm_;
  kernels::cuda::Int8Gemm int8_;
  Projection projection_;
  cudaStream_t stream_;
  ScorerRows rows_;
  DeviceBuffer<float> rows_f32_;  // the rows set, as given
  DeviceBuffer<T> x_;             // and in T [rows, in]
  DeviceBuffer<int8_t> wq_, xq_;  // [out, Kp], [rows, Kp]
  DeviceBuffer<float> ws_, xs_, smooth_, y_;
  DeviceBuffer<float> ref_;    // x W^T of the projection rows_ last computed it for
  DeviceBuffer<int32_t> acc_;  // [rows, out]
  DeviceBuffer<double> sums_;  // error, reference
};

}  // namespace lmx
