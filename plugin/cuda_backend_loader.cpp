// cuda_backend_factory() for liblmx.so: the CUDA backend lives in liblmx_cuda.so beside it and is
// opened the first time a model runs on cuda, so that loading the plugin maps no CUDA library
// (cudart, cuBLAS, cuBLASLt, NCCL: ~155 MiB), and a CPU host needs none of them installed.
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "engine/backend/cuda/cuda_backend_factory.h"
#include "engine/core/error.h"
#include "engine/core/log.h"
#include "plugin/cuda_backend_abi.h"

namespace lmx {
namespace {

struct CudaLibrary {
  LmxCudaEntry entry = nullptr;
  std::string error;  // why entry is null
};

// liblmx_cuda.so in the directory of the library this code is in.
std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuda_backend_factory), &info) == 0 ||
      info.dli_fname == nullptr)
    return "liblmx_cuda.so";  // the dynamic linker's search path
  return (std::filesystem::path(info.dli_fname).parent_path() / "liblmx_cuda.so").string();
}

CudaLibrary open_library() {
  CudaLibrary lib;
  const std::string path = library_path();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed: CUDA stays loaded
  if (handle == nullptr) {
    const char* why = dlerror();
    lib.error = fmt::format(
        "option.device=cuda: the CUDA backend {} could not be loaded ({}); it and the CUDA "
        "libraries it needs (cudart, cuBLAS, NCCL) must be installed for cuda",
        path, why != nullptr ? why : "unknown error");
    return lib;
  }
  auto stamp = reinterpret_cast<LmxCudaStamp>(dlsym(handle, LMX_CUDA_STAMP));
  auto entry = reinterpret_cast<LmxCudaEntry>(dlsym(handle, LMX_CUDA_ENTRY));
  if (stamp == nullptr || entry == nullptr) {
    lib.error = fmt::format("option.device=cuda: {} does not export {} and {}", path,
                            LMX_CUDA_STAMP, LMX_CUDA_ENTRY);
  } else if (std::string(stamp()) != LMX_BUILD_STAMP) {
    lib.error = fmt::format(
        "option.device=cuda: {} comes from another build than this liblmx.so (build {} vs {}); "
        "install the two libraries of one build together",
        path, stamp(), LMX_BUILD_STAMP);
  } else {
    lib.entry = entry;
    lmx::logger().info("CUDA backend loaded from {}", path);
  }
  return lib;
}

const CudaLibrary& cuda_library() {
  static const CudaLibrary lib = open_library();  // once, thread-safe
  return lib;
}

std::unique_ptr<Backend> make_through_library(const LoadedModel& model,
                                              const CudaBackendOptions& opts) {
  const CudaLibrary& lib = cuda_library();
  if (lib.entry == nullptr) throw Error(lib.error);
  const std::shared_ptr<spdlog::logger> log = lmx::shared_logger();
  Backend* backend = nullptr;
  char error[4096] = "";
  if (lib.entry(&model, &opts, &log, &backend, error, sizeof(error)) != 0) throw Error(error);
  return std::unique_ptr<Backend>(backend);
}

}  // namespace

CudaBackendFactory cuda_backend_factory() {
  if (const CudaLibrary& lib = cuda_library(); lib.entry == nullptr) throw Error(lib.error);
  return &make_through_library;
}

}  // namespace lmx
