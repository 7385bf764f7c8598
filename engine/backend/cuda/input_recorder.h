// Calibration on the GPU (engine/backend/activation_observer.h): while a forward runs, each
// projection input's column max |x| is reduced on the device (kernels/calibration.h) and the
// leading rows the observer wants are copied as fp32; after the forward one copy brings the
// maxima (a few MiB for a 7B model) to the host and the observer sees every input. The
// activations themselves never leave the GPU. One rank, one stream.
#pragma once

#include <array>
#include <vector>

#include "engine/backend/activation_observer.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/core/error.h"
#include "engine/model/decoder_desc.h"
#include "kernels/calibration.h"

namespace lmx {

template <typename T>
class InputRecorder {
 public:
  // `d`: the decoder the backend computes (its projections' input widths).
  InputRecorder(ActivationObserver& observer, const DecoderDesc& d)
      : observer_(observer), kv_width_(d.kv_size()) {
    widths_[size_t(LinearSlot::Qkv)] = d.hidden_size;
    widths_[size_t(LinearSlot::O)] = d.q_size();
    widths_[size_t(LinearSlot::Up)] = d.hidden_size;
    widths_[size_t(LinearSlot::Down)] = d.intermediate_size;
    size_t at = 0;
    layers_.resize(size_t(d.num_layers));
    for (Layer& l : layers_) {
      for (size_t s = 0; s < kLinearSlots; ++s) {
        l.inputs[s].max_at = at;
        at += size_t(widths_[s]);
      }
      l.kv_max_at = at;
      at += 2 * size_t(kv_width_);
    }
    maxima_ = DeviceBuffer<float>(at);
    host_maxima_.resize(at);
  }

  // Before a forward: the maxima zeroed, the observer asked which rows it wants.
  void begin(cudaStream_t stream) {
    LMX_CUDA_CHECK(cudaMemsetAsync(maxima_.get(), 0, maxima_.bytes(), stream));
    size_t head_floats = 0;
    for (size_t l = 0; l < layers_.size(); ++l)
      for (size_t s = 0; s < kLinearSlots; ++s) {
        Input& in = layers_[l].inputs[s];
        in.seen = false;
        in.rows = in.head_rows = 0;
        in.wanted = std::max(0, observer_.rows_wanted(int(l), LinearSlot(s)));
        in.head_at = head_floats;
        head_floats += size_t(in.wanted) * size_t(widths_[s]);
      }
    for (Layer& l : layers_) l.kv_seen = false;
    if (head_floats > heads_.size()) heads_ = DeviceBuffer<float>(head_floats);
    if (head_floats == 0) heads_ = {};  // the observer has its rows: give the memory back
    host_heads_.resize(head_floats);
  }

  // x [rows, in] (device, T): the input of layer `layer`'s projection `slot` in this forward.
  void input(int layer, LinearSlot slot, const T* x, int rows, int in, cudaStream_t stream) {
    Input& r = layers_.at(size_t(layer)).inputs[size_t(slot)];
    if (in != widths_[size_t(slot)])
      throw_error("internal: layer {} input {} of width {}, recorded as {}", layer, int(slot), in,
                  widths_[size_t(slot)]);
    r.seen = true;
    r.rows = rows;
    r.head_rows = std::min(rows, r.wanted);
    kernels::cuda::column_abs_max<T>(x, rows, in, in, maxima_.get() + r.max_at, stream);
    if (r.head_rows > 0)
      kernels::cuda::convert<T, float>(x, heads_.get() + r.head_at, size_t(r.head_rows) * in,
                                       stream);
  }

  // The K (after rotary) and V layer `layer` caches in this forward: [rows, kv width] each,
  // row stride `ld` (device, T).
  void kv(int layer, const T* k, const T* v, int rows, int ld, cudaStream_t stream) {
    Layer& l = layers_.at(size_t(layer));
    l.kv_seen = true;
    kernels::cuda::column_abs_max<T>(k, rows, kv_width_, ld, maxima_.get() + l.kv_max_at, stream);
    kernels::cuda::column_abs_max<T>(v, rows, kv_width_, ld,
                                     maxima_.get() + l.kv_max_at + kv_width_, stream);
  }

  // After the forward's kernels: waits for them, copies the summaries, shows the observer.
  void deliver(cudaStream_t stream) {
    LMX_CUDA_CHECK(cudaMemcpyAsync(host_maxima_.data(), maxima_.get(), maxima_.bytes(),
                                   cudaMemcpyDeviceToHost, stream));
    if (!host_heads_.empty())
      LMX_CUDA_CHECK(cudaMemcpyAsync(host_heads_.data(), heads_.get(),
                                     host_heads_.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                     stream));
    LMX_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& layer = layers_[l];
      for (size_t s = 0; s < kLinearSlots; ++s) {
        const Input& r = layer.inputs[s];
        if (!r.seen) continue;
        observer_.observe(int(l), LinearSlot(s),
                          {r.rows, widths_[s], host_maxima_.data() + r.max_at,
                           host_heads_.data() + r.head_at, r.head_rows});
      }
      if (layer.kv_seen) {
        const float* m = host_maxima_.data() + layer.kv_max_at;
        observer_.observe_kv(int(l), kernels::cpu::max_or_nan(m, size_t(kv_width_)),
                             kernels::cpu::max_or_nan(m + kv_width_, size_t(kv_width_)));
      }
    }
  }

 private:
  struct Input {
    size_t max_at = 0, head_at = 0;  // offsets into maxima_ and heads_
    int wanted = 0, rows = 0, head_rows = 0;
    bool seen = false;
  };
  struct Layer {
    std::array<Input, kLinearSlots> inputs;
    size_t kv_max_at = 0;  // K's column maxima, then V's
    bool kv_seen = false;
  };

  ActivationObserver& observer_;
  std::array<int, kLinearSlots> widths_{};
  int kv_width_ = 0;
  std::vector<Layer> layers_;
  DeviceBuffer<float> maxima_;  // every layer's column maxima, zeroed before each forward
  DeviceBuffer<float> heads_;   // the wanted leading rows, fp32
  std::vector<float> host_maxima_, host_heads_;
};

}  // namespace lmx
