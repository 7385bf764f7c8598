// A model's logical weights on the GPU in the compute dtype T (__half, __nv_bfloat16 or float):
// the model's weight set (engine/model/model_weights.h) over device buffers, uploaded from a
// checkpoint (converted on the host, one weight at a time) or filled with random values directly
// in GPU memory (benchmarks: no files, no host copy).
#pragma once

#include <cstdint>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/weight_map.h"

namespace lmx {

template <typename T>
using DeviceLinear = Linear<DeviceBuffer<T>>;
template <typename T>
using DeviceNorm = Norm<DeviceBuffer<T>>;

template <typename T>
struct DeviceWeights : ModelWeights<DeviceBuffer<T>> {
  size_t bytes = 0;  // every buffer above
};

// `refs` from resolve_weights (data in the checkpoint's memory map).
template <typename T>
DeviceWeights<T> upload_weights(const ModelWeightRefs& refs);

// `refs` from describe_weights: N(0, std) matrices, norms 1 + N(0, std), biases N(0, std).
template <typename T>
DeviceWeights<T> random_weights(const ModelWeightRefs& refs, uint64_t seed, float std = 0.02f);

}  // namespace lmx
