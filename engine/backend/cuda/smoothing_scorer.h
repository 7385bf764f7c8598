// smoothquant's alpha search on the GPU (engine/backend/smoothing_scorer.h) over the unquantized
// weights of a calibration backend: each candidate s is scored with the serving path's own W8A8
// kernels (kernels/quantize.h, kernels/w8a8.h: W diag(s) quantized per output channel, x diag(1/s)
// per token, the int8 GEMM, the scaling epilogue in fp32) against x W^T from cuBLAS in fp32
// arithmetic, which is computed once per projection and set of rows. The rows arrive as fp32
// values of T (the calibration forward computed them in T), so converting them back is exact.
#pragma once

#include <functional>
#include <tuple>

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
    if (rows < 1 || in < 1 || x.size() != size_t(rows) * size_t(in))
      throw_error("alpha search: {} values for {} rows of {} columns", x.size(), rows, in);
    grow(rows_f32_, x.size());
    grow(rows_, x.size());
    LMX_CUDA_CHECK(cudaMemcpyAsync(rows_f32_.get(), x.data(), x.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, stream_));
    kernels::cuda::convert<float, T>(rows_f32_.get(), rows_.get(), x.size(), stream_);
    rows_count_ = rows;
    rows_in_ = in;
    ++rows_set_;
  }

  ErrorSums w8a8_error(int layer, LinearSlot slot, std::span<const float> s) override {
    namespace k = kernels::cuda;
    const DeviceLinear<T>& L = weights(layer, slot);
    const int M = rows_count_, N = int(L.out), K = int(L.in), Kp = k::w8a8_padded(K);
    if (M == 0) throw_error("alpha search: no calibration rows set");
    if (rows_in_ != K || s.size() != size_t(K))
      throw_error("alpha search: layer {} projection {} has {} inputs; rows of {}, {} factors",
                  layer, int(slot), K, rows_in_, s.size());
    const size_t out = size_t(M) * size_t(N);
    grow(wq_, size_t(N) * Kp);
    grow(ws_, size_t(N));
    grow(xq_, size_t(M) * Kp);
    grow(xs_, size_t(M));
    grow(acc_, out);
    grow(y_, out);
    grow(smooth_, 2 * size_t(K));
    if (std::tie(ref_layer_, ref_slot_, ref_rows_set_) != std::tie(layer, slot, rows_set_)) {
      grow(ref_, out);
      k::linear_f32_out<T>(gemm_, rows_.get(), {L.weight.get(), nullptr, N, K}, ref_.get(), M,
                           stream_);
      std::tie(ref_layer_, ref_slot_, ref_rows_set_) = std::tie(layer, slot, rows_set_);
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
    k::quantize_rows_int8<T>(rows_.get(), smooth_.get() + K, xq_.get(), xs_.get(), M, K, Kp,
                             stream_);
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
  DeviceBuffer<float> rows_f32_;  // the rows set, as given
  DeviceBuffer<T> rows_;          // and in T [rows, in]
  int rows_count_ = 0, rows_in_ = 0;
  long rows_set_ = 0;             // set_rows calls so far (the reference's key)
  DeviceBuffer<int8_t> wq_, xq_;  // [out, Kp], [rows, Kp]
  DeviceBuffer<float> ws_, xs_, smooth_, y_, ref_;
  DeviceBuffer<int32_t> acc_;  // [rows, out]
  DeviceBuffer<double> sums_;  // error, reference
  int ref_layer_ = -1;
  LinearSlot ref_slot_ = LinearSlot::Qkv;
  long ref_rows_set_ = -1;  // ref_ = x W^T of this layer's slot on these rows
};

}  // namespace lmx
