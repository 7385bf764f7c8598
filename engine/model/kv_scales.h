// The fp8 KV cache's per-layer dequantization scales (kernels/kv_dtype.h): the ones a checkpoint
// carries, their validation, and the per-layer list a backend's cache uses.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/model/architecture.h"
#include "engine/model/checkpoint.h"
#include "kernels/kv_dtype.h"

namespace lmx {

struct LoadedModel;

// The K/V scales `checkpoint` holds, one KvScale per layer, or nullopt when it holds none. Per
// layer, with A = the layer's attention module (the family's o_proj name less its last two parts,
// e.g. "model.layers.N.self_attn."), the first of these spellings present wins:
//   A.k_scale, A.v_scale                       (compressed-tensors / llm-compressor, vLLM's)
//   A.k_proj.k_scale, A.v_proj.v_scale         (NVIDIA ModelOpt)
//   A.k_proj.output_scale, A.v_proj.output_scale (AMD Quark)
//   A.kv_scale                                 (older exports: one scale for K and V)
// Each is one number (shape [], [1] or [1, 1]) of dtype F32, F16 or BF16, positive and finite.
// A malformed scale, a K scale without its V scale, or scales for some layers and not others is
// an lmx::Error naming the tensor and what is wrong.
std::optional<std::vector<kernels::KvScale>> read_checkpoint_kv_scales(const Checkpoint& checkpoint,
                                                                       const DecoderDesc& desc,
                                                                       const TensorNames& names);

// Throws lmx::Error naming `what` unless `scale` is positive and finite.
void check_kv_scale(double scale, const std::string& what);

// The scales layer l's cache uses, [num_layers]: model.kv_scales for an fp8 cache ({1, 1} each
// when the model carries none), {1, 1} for the model dtype. A list of the wrong length is an
// lmx::Error.
std::vector<kernels::KvScale> layer_kv_scales(const LoadedModel& model, kernels::KvDtype dtype);

// "k 0.5..2, v 1..4 over 32 layers": the range of the scales, for logs.
std::string describe_kv_scales(const std::vector<kernels::KvScale>& scales);

}  // namespace lmx
