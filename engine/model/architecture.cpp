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
extern const Architecture kGptjArchitecture;
extern const Architecture kGptNeoXArchitecture;
extern const Architecture kGptNeoArchitecture;
extern const Architecture kOptArchitecture;
extern const Architecture kBloomArchitecture;

namespace {
const Architecture* const kRegistry[] = {
    &kLlamaArchitecture,
    &kMistralArchitecture,
    &kQwen2Architecture,
    &kGpt2Architecture,
    &kGptjArchitecture,
    &kGptNeoXArchitecture,
    &kGptNeoArchitecture,
    &kOptArchitecture,
    &kBloomArchitecture,
};
}  // namespace

float DecoderDesc::attention_scale() const {
  return scale_attention ? 1.0f / std::sqrt(float(head_dim)) : 1.0f;
}

ExecutionPath execution_path(const Architecture& a, bool cpu_device) {
  if (cpu_device)
    return {"cpu_reference",
            fmt::format("device=cpu: the CPU reference backend runs every architecture unfused "
                        "({} has {} kernel-injection policy for CUDA)", a.hf_name,
                        a.fused_policy ? "a" : "no")};
  if (a.fused_policy) return {"kernel_injection", fmt::format("{} has a fused-kernel policy", a.hf_name)};
  return {"generic", fmt::format("{} has no fused-kernel policy: the generic path runs the same "
                                 "steps unfused", a.hf_name)};
}

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
