// option.quantize=dynamic_int8 as the model description carries it: every projection's
// LinearQuant (engine/model/linear.h) says how a backend stores its weight. The backend
// quantizes after materializing (each tensor-parallel rank its own slice); see
// docs/quantization.md.
#pragma once

#include <optional>
#include <string>

#include "engine/model/model_config.h"
#include "engine/model/weight_map.h"
#include "properties/config_enums.h"

namespace lmx {

// dynamic_int8's LinearQuant: per output channel without a group size, else grouped. Throws
// lmx::Error for a group size that is not a power of two from 4 to 65536.
LinearQuant dynamic_int8(std::optional<int> group_size = std::nullopt);

// The configuration's option.quantize (+ option.quantize_group_size) as the loader takes it:
// None, dynamic_int8 as above, or fp8. smoothquant: None here (the model loads unquantized and
// smoothquant::apply marks it after calibrating; smoothquant/smoothquant.h).
LinearQuant linear_quant(properties::Quantize method, std::optional<int> group_size);

// A checkpoint whose projections are already fp8 (config.json `quantization_config`), loaded as
// stored: E4M3 codes (safetensors F8_E4M3) and their scales, no dequantize-requantize. Three
// layouts:
//   compressed-tensors (quant_method "compressed-tensors", format "float-quantized" or
//     "naive-quantized"): config groups of 8-bit float symmetric weights, strategy "tensor" or
//     "channel" (`<weight>_scale` beside each `<weight>`); modules in `ignore` stay 16-bit;
//   AutoFP8 (quant_method "fp8" without weight_block_size): per-tensor `<weight>_scale`;
//   block-scaled (transformers' FP8 integration, quant_method "fp8" with weight_block_size
//     [128, 128]: DeepSeek-V3, Qwen3-*-FP8): `<weight>_scale_inv` [ceil(out / 128), in / 128],
//     W[o, k] = e4m3(q[o, k]) * scale_inv[o / 128, k / 128] (it multiplies, despite its name).
// Modules kept in 16 bits (`ignore`, `modules_to_not_convert`) are told by their tensors' dtype.
// Activations are quantized per token at run time, as option.quantize=fp8 does: a static
// per-tensor `input_scale` in the checkpoint is not used (static_input_scales says it is there,
// and the loader logs it).
struct CheckpointFp8 {
  // "compressed-tensors", "fp8 (AutoFP8)" or "fp8 (block-scaled 128 x 128)", for messages
  std::string layout;
  bool static_input_scales = false;
  int64_t block = 0;  // weight_block_size's side (128); 0: scales per tensor or output channel
};

// The checkpoint's fp8 layout; nullopt when config.json has no quantization_config. Throws
// lmx::Error naming the method, or the key and value, for any other quantization (GPTQ, AWQ,
// bitsandbytes, a weight_block_size other than [128, 128], int8 or 4-bit compressed-tensors, ...).
std::optional<CheckpointFp8> checkpoint_fp8(const ModelConfig& config);

// Refuses option.quantize on a checkpoint that is already quantized: an fp8 checkpoint takes
// option.quantize unset or fp8 (what it is); dynamic_int8 and smoothquant quantize F32 / F16 /
// BF16 weights. The error names the checkpoint's method.
void check_quantizable(const ModelConfig& config, const LinearQuant& quant);

// Marks every projection (qkv, o, up, down, project_in / out and the LM head, tied or not; not
// the embedding) for `quant`; fp8 and W8A8 (benchmarks on random weights: smoothquant's kernels
// without a calibration) mark qkv, o, up and down (as smoothquant::mark does), not the LM head. Throws lmx::Error naming the tensor and its sizes when the group
// size does not divide a projection's input size.
void request_quantization(ModelWeightRefs& weights, const LinearQuant& quant);

// Calls f(linear, label) for every present projection, in load order; label names it in errors
// ("layer 3 qkv", "lm_head").
template <typename Buffer, typename F>
void for_each_linear(ModelWeights<Buffer>& w, F&& f) {
  const auto visit = [&](Linear<Buffer>& l, const std::string& label) {
    if (l.present()) f(l, label);
  };
  visit(w.project_in, "project_in");
  for (size_t i = 0; i < w.layers.size(); ++i) {
    visit(w.layers[i].qkv, linear_label(i, "qkv"));
    visit(w.layers[i].o, linear_label(i, "o"));
    visit(w.layers[i].up, linear_label(i, "up"));
    visit(w.layers[i].down, linear_label(i, "down"));
  }
  visit(w.project_out, "project_out");
  visit(w.lm_head, "lm_head");
}

// smoothquant's folds into the norms (smooth_in_norm): calls fold(norm, s) once for every layer
// norm whose output smoothed projections read, s [hidden] their shared factors; the backend
// divides the norm's weight and bias by s there (norm(x) diag(1/s) is that norm). Under a shared
// block norm (GPT-J) qkv and up read one norm and must share one s: else lmx::Error.
template <typename Buffer, typename Fold>
void for_each_smoothed_norm(ModelWeights<Buffer>& w, bool shared_block_norm, Fold&& fold) {
  const auto visit = [&](Norm<Buffer>& n, const Linear<Buffer>& L) {
    if (L.quant.smooth && L.quant.smooth_in_norm) fold(n, *L.quant.smooth);
  };
  for (LayerWeights<Buffer>& l : w.layers) {
    visit(l.attn_norm, l.qkv);
    if (!shared_block_norm)
      visit(l.mlp_norm, l.up);
    else if (l.up.quant.smooth != l.qkv.quant.smooth && l.up.quant.smooth_in_norm)
      throw_error("a shared block norm feeds qkv and up: their smoothing must be one vector");
  }
}

}  // namespace lmx
