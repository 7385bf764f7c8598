// How the engine (engine/api/engine.cpp) reaches the CUDA backend without linking it. Whoever
// links the engine defines cuda_backend_factory():
//   - lmx_engine (the CLI, the tests, the benchmarks) links the CUDA backend and returns
//     make_cuda_backend (cuda_backend_linked.cpp);
//   - liblmx.so (plugin/cuda_backend_loader.cpp) opens liblmx_cuda.so beside itself the first
//     time a model runs on cuda, so that loading the plugin maps no CUDA library: a CPU host
//     needs none installed.
// Plain C++: includes no CUDA header.
#pragma once

#include <memory>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/model.h"

namespace lmx {

using CudaBackendFactory = std::unique_ptr<Backend> (*)(const LoadedModel& model,
                                                        const CudaBackendOptions& opts);

// The CUDA backend's make_cuda_backend, or lmx::Error saying why it cannot be had (for the
// plugin: liblmx_cuda.so or the CUDA libraries it needs are missing).
CudaBackendFactory cuda_backend_factory();

}  // namespace lmx
