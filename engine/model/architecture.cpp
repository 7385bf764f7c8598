#include "engine/model/architecture.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/error.h"

namespace lmx {

// One line per family; the definitions live in engine/model/architectures/<family>.cpp.
extern const Architecture kLlamaArchitecture;
extern const Architecture kMistralArchitecture;
extern const Architecture kQwen2Architecture;
extern const Architecture kGpt2Architecture;

namespace {
const Architecture* const kRegistry[] = {
    &kLlamaArchitecture,
    &kMistralArchitecture,
    &kQwen2Architecture,
    &kGpt2Architecture,
};
}  // namespace

float DecoderDesc::attention_scale() const { return 1.0f / std::sqrt(float(head_dim)); }

const Architecture& find_architecture(const std::string& hf_name) {
  for (const Architecture* a : kRegistry)
    if (hf_name == a->hf_name) return *a;
  throw_error("unsupported architecture '{}'; supported: {}", hf_name,
              fmt::join(supported_architectures(), ", "));
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const Architecture* a : kRegistry) names.emplace_back(a->hf_name);
  return names;
}

}  // namespace lmx
