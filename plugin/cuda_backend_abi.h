// The one function liblmx_cuda.so exports, for liblmx.so (plugin/cuda_backend_loader.cpp). Both
// libraries come from the same build: the types crossing are the engine's own C++ types, so the
// loader first checks that the other library's build stamp (a configure-time value given to both)
// is its own, and refuses a liblmx_cuda.so of another build.
#pragma once

#include <cstddef>
#include <memory>

#include <spdlog/logger.h>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/model.h"

#define LMX_CUDA_ENTRY "lmx_cuda_backend_v1"
#define LMX_CUDA_STAMP "lmx_cuda_build_stamp"

extern "C" {
// Makes make_cuda_backend(*model, *opts) with the engine's log lines going to *log. Returns 0 and
// the backend in *out (null: a non-leader rank under mpirun has run to the end, as
// make_cuda_backend says), or 1 with the error message in error[0..error_size) (NUL-terminated,
// cut to fit). Never throws.
using LmxCudaEntry = int (*)(const lmx::LoadedModel* model, const lmx::CudaBackendOptions* opts,
                             const std::shared_ptr<spdlog::logger>* log, lmx::Backend** out,
                             char* error, size_t error_size);
// LMX_BUILD_STAMP of the library.
using LmxCudaStamp = const char* (*)();
}
