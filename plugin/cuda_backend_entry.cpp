// liblmx_cuda.so: the CUDA backend for liblmx.so, opened by it on first use
// (plugin/cuda_backend_loader.cpp). It links the whole engine (lmx_engine, with the CUDA backend
// and the CUDA libraries) and exports only the two functions of plugin/cuda_backend_abi.h.
#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "engine/core/log.h"
#include "plugin/cuda_backend_abi.h"

#define LMX_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

LMX_CUDA_EXPORT const char* lmx_cuda_build_stamp() { return LMX_BUILD_STAMP; }

LMX_CUDA_EXPORT int lmx_cuda_backend_v1(const lmx::LoadedModel* model,
                                        const lmx::CudaBackendOptions* opts,
                                        const std::shared_ptr<spdlog::logger>* log,
                                        lmx::Backend** out, char* error, size_t error_size) {
  const auto fail = [&](const char* message) {
    if (error_size == 0) return 1;
    const size_t n = std::min(std::strlen(message), error_size - 1);
    std::memcpy(error, message, n);
    error[n] = '\0';
    return 1;
  };
  try {
    if (log != nullptr && *log) lmx::set_logger(*log);  // this library's copy of lmx::logger()
    *out = lmx::make_cuda_backend(*model, *opts).release();
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("the CUDA backend failed (unknown exception)");
  }
}
