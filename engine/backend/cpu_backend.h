// The CPU reference backend: fp32 math (f16/bf16 weights upcast at load), BLAS GEMMs, a paged KV
// cache in host memory. Every other backend is tested against this one.
#pragma once

#include <memory>
#include <span>

#include "engine/backend/backend.h"
#include "engine/model/model.h"

namespace lmx {

std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, const KvCacheShape& kv);

// Tests: layer `layer`'s K and V cache of a backend made by make_cpu_backend, fp32
// [num_blocks, block_size, kv_heads, head_dim] (with KvCacheShape::dtype fp8_e4m3 every stored
// value is E4M3-representable). Throws lmx::Error for another backend or a bad layer.
struct CpuKvView {
  std::span<const float> k, v;
};
CpuKvView cpu_kv_cache(const Backend& backend, int layer);

}  // namespace lmx
