// Resolves an architecture's tensor names against a checkpoint into the engine's logical weights,
// checking every tensor's presence, dtype and shape, and describing how fused or interleaved
// tensors map onto the engine's layout (WeightRef::row_order). Nothing is copied here: each
// backend materializes the references in the dtype and layout it computes in.
#pragma once

#include <cstddef>
#include <cstdint>
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
// (LinearRef::q.scale); without it an F8_E4M3 tensor is an error naming it. fp8_block: the
// checkpoint's weight_block_size (128: `<weight>_scale_inv` per 128 x 128 block, LinearQuant
// group 128), 0: `<weight>_scale` per tensor or output channel.
ModelWeightRefs resolve_weights(const Checkpoint& checkpoint, const DecoderDesc& desc,
                                const TensorNames& names, bool fp8_checkpoint = false,
                                int64_t fp8_block = 0);

// Writes the weight as fp32 in canonical layout; `dst` holds ref.numel() floats. Every value is
// checked finite (an error names the tensor and row), and the checkpoint pages read are released
// from the process's memory (engine/model/mapped_file.h).
void materialize_f32(const WeightRef& ref, float* dst);
std::vector<float> materialize_f32(const WeightRef& ref);
// Rows [begin, end) only (a load in bounded chunks): dst holds (end - begin) x columns floats.
void materialize_rows_f32(const WeightRef& ref, int64_t begin, int64_t end, float* dst);
// The same rows as stored, without conversion, when every part is stored as `dtype` (F16, BF16
// or F32) and not transposed: dst holds (end - begin) x columns values of dtype. Checked and
// released as above. Returns false, writing nothing, when the weight is stored otherwise.
bool copy_rows_as_stored(const WeightRef& ref, DType dtype, int64_t begin, int64_t end,
                         std::byte* dst);

}  // namespace lmx
