// Where tests find ../shared/models: the LMX_SHARED_MODELS_DIR environment variable when set
// (the device machine gets a copy carried in the repository), else the path fixed at configure.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace lmx::testing {

inline std::filesystem::path shared_models_dir() {
  if (const char* env = std::getenv("LMX_SHARED_MODELS_DIR"); env && *env) return env;
  return LMX_SHARED_MODELS_DIR;
}

}  // namespace lmx::testing
