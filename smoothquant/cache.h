// The calibration cache: a plan (alphas and smoothing factors) in a JSON file keyed by the model
// (config.json and each checkpoint file's name, size and modification time), the calibration
// text, the sample settings and the alpha setting, so that a restart skips calibration.
// Where: $LMX_CACHE_DIR/smoothquant, else $XDG_CACHE_HOME/lmx/smoothquant, else
// ~/.cache/lmx/smoothquant; clearing it is deleting that folder (or one file).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "smoothquant/plan.h"

namespace lmx::smoothquant {

std::filesystem::path default_cache_dir();

// The file a plan for these inputs lives in (`what` describes the settings: samples, tokens per
// sample, rows kept, alpha; the text enters through its hash).
std::filesystem::path cache_file(const std::filesystem::path& cache_dir,
                                 const std::filesystem::path& model_dir, const std::string& text,
                                 const std::string& what);

// The cached plan, or nullopt when there is none; a file that cannot be read as a plan is
// warned about and ignored (then overwritten).
std::optional<Plan> read_plan(const std::filesystem::path& file, const std::string& what);

// Writes atomically (a temporary file renamed); a failure is a warning, not an error (the cache
// is an optimization).
void write_plan(const std::filesystem::path& file, const std::string& what, const Plan& plan);

}  // namespace lmx::smoothquant
