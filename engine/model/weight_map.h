// Resolves an architecture's tensor names against a checkpoint into the engine's logical weights,
// checking every tensor's presence, dtype and shape, and describing how fused or interleaved
// tensors map onto the engine's layout (WeightRef::row_order). Nothing is copied here: each
// backend materializes the references in the dtype and layout it computes in.
#pragma once

#include <vector>

#include "engine/model/architecture.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_weights.h"

namespace lmx {

using LayerWeightRefs = LayerWeights<WeightRef>;
using ModelWeightRefs = ModelWeights<WeightRef>;

// The logical weights a DecoderDesc implies, with canonical shapes and no checkpoint parts: what
// resolve_weights returns minus the data. Backends that make weights without a checkpoint
// (random-weight benchmarks) allocate from this.
ModelWeightRefs describe_weights(const DecoderDesc& desc);

// fp8_checkpoint: config.json declares an fp8 checkpoint (engine/model/quantization.h,
// CheckpointFp8): the decoder projections stored as F8_E4M3 are marked Fp8 with their scales
// (LinearRef::q.scale); without it an F8_E4M3 tensor is an error naming it.
ModelWeightRefs resolve_weights(const Checkpoint& checkpoint, const DecoderDesc& desc,
                                const TensorNames& names, bool fp8_checkpoint = false);

// Writes the weight as fp32 in canonical layout; `dst` holds ref.numel() floats.
void materialize_f32(const WeightRef& ref, float* dst);
std::vector<float> materialize_f32(const WeightRef& ref);

}  // namespace lmx
