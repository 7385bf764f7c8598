// The CPU reference backend: fp32 math (f16/bf16 weights upcast at load), BLAS GEMMs, a paged KV
// cache in host memory. Every other backend is tested against this one.
#pragma once

#include <memory>

#include "engine/backend/backend.h"
#include "engine/model/model.h"

namespace lmx {

std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, const KvCacheShape& kv);

}  // namespace lmx
