// A model directory opened and validated: config, architecture, decoder description and the
// resolved (still memory-mapped) weights. Backends build their device copies from this.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/architecture.h"
#include "engine/model/checkpoint.h"
#include "engine/model/weight_map.h"
#include "kernels/kv_dtype.h"

namespace lmx {

struct LoadedModel {
  std::filesystem::path dir;
  ModelConfig config;
  const Architecture* architecture = nullptr;
  DecoderDesc desc;
  std::unique_ptr<Checkpoint> checkpoint;  // owns the memory maps `weights` points into
  ModelWeightRefs weights;
  // Benchmark models: config.json says {"lmx_random_weights": {"seed": N}} and the directory has
  // no weights; `weights` then holds shapes only and the CUDA backend makes random values in GPU
  // memory (how lmx-server serves a 7B-shaped model without a 13 GB file).
  std::optional<uint64_t> random_seed;
  // What quantization did, for the engine's stats (null: none): {"method"} plus, for smoothquant,
  // the alphas per layer, whether searched, where 1/s went and the calibration (cache file or
  // samples and tokens); dynamic_int8's group size.
  nlohmann::json quantization = nullptr;
  // fp8 KV cache dequantization scales, [num_layers] (engine/model/kv_scales.h): the checkpoint's
  // or calibrated ones, chosen by the engine when option.kv_cache_dtype=fp8_e4m3
  // (smoothquant/kv_calibration.h). Empty: 1 for every layer. A model-dtype cache ignores them.
  std::vector<kernels::KvScale> kv_scales;
};

// Reads config.json (+ generation_config.json), picks the architecture and resolves every weight.
// With `quant` (option.quantize=dynamic_int8, engine/model/quantization.h) every projection is
// marked for int8 storage: an already-quantized checkpoint or a group size that does not divide
// a projection is refused. Throws lmx::Error naming the file, key or tensor on any problem.
LoadedModel load_model(const std::filesystem::path& model_dir, const LinearQuant& quant = {});

}  // namespace lmx
