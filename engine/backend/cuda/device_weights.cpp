#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/cuda/random_fill.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace lmx {

template <typename T>
DeviceWeights<T> upload_weights(const ModelWeightRefs& refs) {
  DeviceWeights<T> w;
  std::vector<float> f32;
  std::vector<T> host;
  static_cast<ModelWeights<DeviceBuffer<T>>&>(w) =
      map_weights<DeviceBuffer<T>>(refs, [&](const WeightRef& ref, WeightKind) {
        if (!ref.present()) return DeviceBuffer<T>();
        f32.resize(size_t(ref.numel()));
        materialize_f32(ref, f32.data());
        host.assign(f32.begin(), f32.end());  // round to T on the host
        DeviceBuffer<T> buf(host.size());
        LMX_CUDA_CHECK(cudaMemcpy(buf.get(), host.data(), buf.bytes(), cudaMemcpyHostToDevice));
        w.bytes += buf.bytes();
        return buf;
      });
  return w;
}

template <typename T>
DeviceWeights<T> random_weights(const ModelWeightRefs& refs, uint64_t seed, float std) {
  DeviceWeights<T> w;
  uint64_t stream = seed;
  static_cast<ModelWeights<DeviceBuffer<T>>&>(w) =
      map_weights<DeviceBuffer<T>>(refs, [&](const WeightRef& ref, WeightKind kind) {
        if (!ref.present()) return DeviceBuffer<T>();
        DeviceBuffer<T> buf(size_t(ref.numel()));
        cuda_init::fill_random<T>(buf.get(), buf.size(), ++stream,
                                  kind == WeightKind::NormWeight ? 1.0f : 0.0f, std);
        LMX_CUDA_CHECK(cudaGetLastError());
        w.bytes += buf.bytes();
        return buf;
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
