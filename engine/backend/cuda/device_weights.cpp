#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/cuda/random_fill.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <functional>

namespace lmx {
namespace {

// Visits every (ref, buffer) pair of a model.
template <typename T>
void for_each_weight(const ModelWeightRefs& r, DeviceWeights<T>& w,
                     const std::function<void(const WeightRef&, DeviceBuffer<T>&, bool norm)>& f) {
  f(r.embed, w.embed, false);
  f(r.position_embed, w.position_embed, false);
  f(r.final_norm_weight, w.final_norm_w, true);
  f(r.final_norm_bias, w.final_norm_b, false);
  if (!r.lm_head_tied) f(r.lm_head, w.lm_head, false);
  w.layers.resize(r.layers.size());
  for (size_t l = 0; l < r.layers.size(); ++l) {
    const LayerWeightRefs& a = r.layers[l];
    DeviceLayer<T>& b = w.layers[l];
    f(a.attn_norm_weight, b.attn_norm_w, true);
    f(a.attn_norm_bias, b.attn_norm_b, false);
    f(a.qkv_weight, b.qkv_w, false);
    f(a.qkv_bias, b.qkv_b, false);
    f(a.o_weight, b.o_w, false);
    f(a.o_bias, b.o_b, false);
    f(a.mlp_norm_weight, b.mlp_norm_w, true);
    f(a.mlp_norm_bias, b.mlp_norm_b, false);
    f(a.up_weight, b.up_w, false);
    f(a.up_bias, b.up_b, false);
    f(a.down_weight, b.down_w, false);
    f(a.down_bias, b.down_b, false);
  }
}

}  // namespace

template <typename T>
DeviceWeights<T> upload_weights(const ModelWeightRefs& refs) {
  DeviceWeights<T> w;
  std::vector<float> f32;
  std::vector<T> host;
  for_each_weight<T>(refs, w, [&](const WeightRef& ref, DeviceBuffer<T>& buf, bool) {
    if (!ref.present()) return;
    f32.resize(size_t(ref.numel()));
    materialize_f32(ref, f32.data());
    host.assign(f32.begin(), f32.end());  // round to T on the host
    buf = DeviceBuffer<T>(host.size());
    LMX_CUDA_CHECK(cudaMemcpy(buf.get(), host.data(), buf.bytes(), cudaMemcpyHostToDevice));
    w.bytes += buf.bytes();
  });
  return w;
}

template <typename T>
DeviceWeights<T> random_weights(const ModelWeightRefs& refs, uint64_t seed, float std) {
  DeviceWeights<T> w;
  uint64_t stream = seed;
  for_each_weight<T>(refs, w, [&](const WeightRef& ref, DeviceBuffer<T>& buf, bool norm) {
    if (!ref.present()) return;
    buf = DeviceBuffer<T>(size_t(ref.numel()));
    cuda_init::fill_random<T>(buf.get(), buf.size(), ++stream, norm ? 1.0f : 0.0f, std);
    LMX_CUDA_CHECK(cudaGetLastError());
    w.bytes += buf.bytes();
  });
  LMX_CUDA_CHECK(cudaDeviceSynchronize());
  return w;
}

#define LMX_INSTANTIATE(T)                                                      \
  template DeviceWeights<T> upload_weights<T>(const ModelWeightRefs&);          \
  template DeviceWeights<T> random_weights<T>(const ModelWeightRefs&, uint64_t, float);
LMX_INSTANTIATE(float)
LMX_INSTANTIATE(__half)
LMX_INSTANTIATE(__nv_bfloat16)
#undef LMX_INSTANTIATE

}  // namespace lmx
