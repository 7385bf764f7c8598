// A model's logical weights on the GPU in the compute dtype T (__half, __nv_bfloat16 or float):
// the model's weight set (engine/model/model_weights.h) over device buffers, uploaded from a
// checkpoint (converted on the host, one weight at a time) or filled with random values directly
// in GPU memory (benchmarks: no files, no host copy).
//
// Each projection is finished on the GPU as soon as it is made, before the next weight:
//   - with WeightLoad::fold_norms (the fused decode path, see CudaBackend), the norm that feeds
//     qkv and gate/up is folded into its columns: W[:, k] *= norm_weight[k]; a LayerNorm's bias
//     into its bias (b + W beta, before), and the row sums of the result kept (after the
//     quantization below, of the weights as quantized: NormFoldStorage);
//   - a projection the description marks for dynamic_int8 (per output channel), smoothquant's
//     W8A8 or fp8 is quantized (kernels/quantize.h; W8A8: W diag(s), the smoothing applied in
//     fp32 by the quantizer; fp8: E4M3 codes) and its T weight freed, so the load holds at most
//     one projection in T beside the quantized ones. A tied LM head is quantized from the
//     embedding at the end (the embedding itself stays in T). At the end smoothquant's 1/s goes
//     into the norms that produce the smoothed inputs (smooth_in_norm), else it is kept for the
//     activations.
#pragma once

#include <cstdint>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/weight_map.h"
#include "kernels/linear.h"

namespace lmx {

// dynamic_int8 and smoothquant on the GPU: int8 values [out, in] and one fp32 scale a row [out]
// (smoothquant: of the smoothed weight W diag(s)); fp8: E4M3 codes [out, in] in `values` (bytes)
// and one fp32 scale a row.
template <typename T>
struct QuantStorage<DeviceBuffer<T>> {
  DeviceBuffer<int8_t> values;
  DeviceBuffer<float> scales;
  DeviceBuffer<float> inv_smooth;  // smoothquant, smoothing not folded into a norm: 1 / s [in]
};

// A LayerNorm folded into the projection that reads it (WeightLoad::fold_norms): the row sums
// [out] of the folded weight as the kernels multiply it (after quantization), with which the
// decode projection centers its input (kernels/gemm.h, InputNorm). Empty otherwise.
template <typename T>
struct NormFoldStorage<DeviceBuffer<T>> {
  DeviceBuffer<float> row_sums;
};

template <typename T>
using DeviceLinear = Linear<DeviceBuffer<T>>;
template <typename T>
using DeviceNorm = Norm<DeviceBuffer<T>>;

// L as the kernels take it (kernels/linear.h): the weight in T, or its int8 values / E4M3 codes
// with their row scales (or grouped scales: LinearQuant::group); the bias when it has one.
template <typename T>
kernels::LinearWeights<T> linear_view(const DeviceLinear<T>& L) {
  return {L.weight.empty() ? nullptr : L.weight.get(),
          L.bias.empty() ? nullptr : L.bias.get(),
          int(L.out),
          int(L.in),
          L.q.values.empty() ? nullptr : L.q.values.get(),
          L.q.scales.empty() ? nullptr : L.q.scales.get(),
          L.quant.kind == QuantKind::Fp8,
          int(L.quant.group)};
}

template <typename T>
struct DeviceWeights : ModelWeights<DeviceBuffer<T>> {
  size_t bytes = 0;  // every buffer above, as held after the load (int8 where quantized)
  size_t peak_bytes = 0;  // the most held at once during the load
  bool norms_folded = false;  // WeightLoad::fold_norms as the load applied it
};

struct WeightLoad {
  // Fold the input norms of qkv and gate/up into them: the norm's weight into their columns; a
  // LayerNorm's bias into their biases (b + W beta) and its mean through NormFoldStorage.
  bool fold_norms = false;
  bool layer_norms = false;  // the decoder's norms are LayerNorms (else RMSNorms)
  bool shared_block_norm = false;  // the decoder's (DecoderDesc): where smoothquant's 1/s goes
};

// `refs` from resolve_weights (data in the checkpoint's memory map).
template <typename T>
DeviceWeights<T> upload_weights(const ModelWeightRefs& refs, const WeightLoad& load);

// `refs` from describe_weights: N(0, std) matrices, norms 1 + N(0, std), biases N(0, std).
template <typename T>
DeviceWeights<T> random_weights(const ModelWeightRefs& refs, uint64_t seed, const WeightLoad& load,
                                float std = 0.02f);

}  // namespace lmx
