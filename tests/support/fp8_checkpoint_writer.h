// Test support: fp8 checkpoints (engine/model/quantization.h, CheckpointFp8) made from a tiny
// Llama's fp32 tensors (checkpoint_writer.h) with the reference quantizer, in the layouts
// published checkpoints use.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/checkpoint_writer.h"

namespace lmx::testing {

// compressed-tensors' quantization_config: 8-bit float weights with `strategy` ("channel" or
// "tensor"), dynamic per-token activations, the LM head ignored.
nlohmann::json compressed_tensors_config(const char* strategy);

// `tensors`' decoder projections (layers 0..layers-1, Llama names) as F8_E4M3 codes with
// `<weight>_scale` beside each, from quant::cpu::quantize_rows_e4m3: [rows, 1] per channel, or
// [1] per tensor, which needs every row of a projection to have the same scale
// (equalize_row_maxima); std::logic_error otherwise.
std::map<std::string, TensorSpec> fp8_tensors(std::map<std::string, TensorSpec> tensors,
                                              int layers, bool per_tensor);

// transformers' block-scaled fp8 quantization_config: weight_block_size [128, 128], dynamic
// activations, the LM head kept in 16 bits (modules_to_not_convert).
nlohmann::json block_fp8_config();

// `tensors`' decoder projections (as fp8_tensors) as F8_E4M3 codes with `<weight>_scale_inv`
// [ceil(rows / 128), ceil(in / 128)] F32 beside each: each 128 x 128 block (the last ones
// partial) quantized as quant::cpu::quantize_rows_e4m3 quantizes a row, over the block's max |w|:
// s = max / 448, q = e4m3(w / s).
std::map<std::string, TensorSpec> fp8_block_tensors(std::map<std::string, TensorSpec> tensors,
                                                    int layers);
inline constexpr int64_t kFp8Block = 128;

// The decoder's weights (names with "layers") scaled by a factor a 128 x 128 block (1/4, 1, 4,
// 1/2 in turn over block rows and columns), so that a row's blocks differ in magnitude: a
// per-row scale then serves its small blocks poorly, a block scale each well.
void vary_block_magnitudes(std::map<std::string, TensorSpec>& tensors);

// A block-scaled checkpoint's tensors (fp8_block_tensors) with every F8_E4M3 weight replaced by
// its dequantized values, e4m3(q) x scale_inv of its block, in F32 (the scales dropped): the
// model the checkpoint stands for.
std::map<std::string, TensorSpec> dequantized_block_tensors(std::map<std::string, TensorSpec> t);

// One element of every row of every projection set to 1.5x the tensor's max |w| (with `columns`
// > 0, one in each `columns` columns of every row): the rows of a tensor then share their max
// |w|, so per-tensor and per-channel scales are the same number (and, with columns = 128, the
// scales of its 128 x 128 blocks too).
void equalize_row_maxima(std::map<std::string, TensorSpec>& tensors, int layers,
                         int64_t columns = 0);

// "model.layers.{layer}.{p}" for a projection `p` such as "self_attn.q_proj".
std::string llama_projection(int layer, const std::string& p);

}  // namespace lmx::testing
