// option.quantize=smoothquant (docs/quantization.md): calibrate the model over a text (on the GPU
// in the serving dtype, or the CPU reference in fp32: CalibrationDevice),
// choose the smoothing factors (alpha fixed or searched per layer), cache them, and mark every
// decoder projection W8A8 with its smoothing; the backend then smooths, quantizes and folds as it
// loads (engine/backend/cpu_backend.cpp).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "properties/serving_config.h"
#include "smoothquant/calibration.h"
#include "smoothquant/plan.h"

namespace lmx::smoothquant {

inline constexpr int kDefaultSamples = 128;       // option.smoothquant_calibration_samples
inline constexpr int kSampleTokens = 512;         // tokens per sample (less: the model's context)
inline constexpr int64_t kSearchRows = 512;       // input rows per layer the alpha search scores

struct Settings {
  std::optional<double> alpha;        // unset: searched per layer
  std::string calibration_file;       // empty: the text shipped with LMX (default_calibration_text)
  int samples = kDefaultSamples;      // at most this many windows of kSampleTokens
  std::filesystem::path cache_dir;    // empty: default_cache_dir(); "-" : no cache
  CalibrationDevice device;           // where calibration and the alpha search run (default: CPU)
};

// The calibration text written for LMX (smoothquant/calibration.txt, compiled in).
const std::string& default_calibration_text();

// Up to `samples` windows of the encoded text: each starts with the tokens the tokenizer puts
// before any text (BOS for Llama-family tokenizers), as every request does, then up to
// sample_tokens (at most `context`) tokens of text in all.
std::vector<std::vector<int32_t>> make_samples(const Tokenizer& tok, const std::string& text,
                                               int samples, int sample_tokens, int context);

// What apply() did, for logs and reports.
struct Report {
  Plan plan;
  bool from_cache = false;
  std::filesystem::path cache_file;
  int samples = 0, tokens = 0;  // calibration run (0 when cached)
  double seconds = 0.0;         // calibration and alpha search, the model's load included
};

// `model` is loaded without quantization; afterwards its qkv / o / up / down are W8A8 with the
// plan's smoothing. Logs the chosen alphas. Throws lmx::Error for a calibration file that cannot
// be read or is empty, samples < 1, an alpha outside [0, 1], a model with random weights.
Report apply(LoadedModel& model, const Settings& settings);

// The model with its quantization: `quant` as load_model takes it (dynamic_int8), or with
// `smoothquant` settings loaded unquantized and apply()'d.
LoadedModel load_quantized_model(const std::filesystem::path& dir, const LinearQuant& quant,
                                 const std::optional<Settings>& smoothquant);

// Where the configuration's model runs, for calibration: option.device and option.dtype, GPU 0
// (calibration runs once, before the replicas and ranks load).
CalibrationDevice calibration_device(const properties::ServingConfig& config);

// The configuration's smoothquant settings; nullopt unless option.quantize=smoothquant.
std::optional<Settings> settings_from(const properties::ServingConfig& config);

// Throws lmx::Error naming `what` unless 1 <= n <= 1,000,000.
void check_samples(long long n, const char* what);

}  // namespace lmx::smoothquant
