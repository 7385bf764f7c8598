// Resolves an architecture's tensor names against a checkpoint into the engine's logical weights,
// checking every tensor's presence, dtype and shape. Nothing is copied here: each backend
// materializes the references in the dtype and layout it computes in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/architecture.h"
#include "engine/model/checkpoint.h"

namespace lmx {

// One logical weight: the row-wise concatenation of checkpoint tensors. Canonical layout is
// nn.Linear's [out, in] (or [n] for vectors); parts stored as [in, out] are `transposed`.
struct WeightRef {
  std::string name;  // first part's name, for messages
  std::vector<const TensorView*> parts;
  bool transposed = false;
  std::vector<int64_t> shape;  // canonical shape of the whole

  bool present() const { return !shape.empty(); }  // false: the model has no such weight
  int64_t numel() const;
};

struct LayerWeightRefs {
  WeightRef attn_norm_weight, attn_norm_bias;  // [hidden]
  WeightRef qkv_weight;                        // [q_size + 2 kv_size, hidden]
  WeightRef qkv_bias;                          // [q_size + 2 kv_size]
  WeightRef o_weight, o_bias;                  // [hidden, q_size], [hidden]
  WeightRef mlp_norm_weight, mlp_norm_bias;    // [hidden]
  WeightRef up_weight, up_bias;  // gated: [2 * inter, hidden] (gate rows, then up rows); plain: [inter, hidden]
  WeightRef down_weight, down_bias;  // [hidden, inter], [hidden]
};

struct ModelWeightRefs {
  WeightRef embed;           // [vocab, hidden]
  WeightRef position_embed;  // [max_positions, hidden], learned positions only
  WeightRef final_norm_weight, final_norm_bias;  // [hidden]
  WeightRef lm_head;         // [vocab, hidden]; the embedding itself when tied
  bool lm_head_tied = false;
  std::vector<LayerWeightRefs> layers;
};

// The logical weights a DecoderDesc implies, with canonical shapes and no checkpoint parts: what
// resolve_weights returns minus the data. Backends that make weights without a checkpoint
// (random-weight benchmarks) allocate from this.
ModelWeightRefs describe_weights(const DecoderDesc& desc);

ModelWeightRefs resolve_weights(const Checkpoint& checkpoint, const DecoderDesc& desc,
                                const TensorNames& names);

// Writes the weight as fp32 in canonical layout; `dst` holds ref.numel() floats.
void materialize_f32(const WeightRef& ref, float* dst);
std::vector<float> materialize_f32(const WeightRef& ref);

}  // namespace lmx
