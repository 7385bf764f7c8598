// A model's logical weights on the GPU in the compute dtype T (__half, __nv_bfloat16 or float),
// uploaded from a checkpoint (converted on the host, layer by layer) or filled with random
// values directly in GPU memory (benchmarks: no files, no host copy).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/weight_map.h"

namespace lmx {

template <typename T>
struct DeviceLayer {
  DeviceBuffer<T> attn_norm_w, attn_norm_b, qkv_w, qkv_b, o_w, o_b;
  DeviceBuffer<T> mlp_norm_w, mlp_norm_b, up_w, up_b, down_w, down_b;
};

template <typename T>
struct DeviceWeights {
  DeviceBuffer<T> embed, position_embed, final_norm_w, final_norm_b, lm_head;  // lm_head empty when tied
  std::vector<DeviceLayer<T>> layers;
  size_t bytes = 0;

  const T* head() const { return lm_head.empty() ? embed.get() : lm_head.get(); }
};

// `refs` from resolve_weights (data in the checkpoint's memory map).
template <typename T>
DeviceWeights<T> upload_weights(const ModelWeightRefs& refs);

// `refs` from describe_weights: N(0, std) matrices, norms 1 + N(0, std), biases N(0, std).
template <typename T>
DeviceWeights<T> random_weights(const ModelWeightRefs& refs, uint64_t seed, float std = 0.02f);

}  // namespace lmx
