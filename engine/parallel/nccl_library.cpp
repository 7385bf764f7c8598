#include "engine/parallel/nccl_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "engine/core/error.h"

namespace lmx {
namespace {

constexpr const char* kSoname = "libnccl.so.2";

template <typename F>
void resolve(void* handle, const char* name, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(handle, name));
  if (!fn) throw_error("{} has no {}: not an NCCL 2 runtime", kSoname, name);
}

NcclLibrary open_library() {
  void* handle = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw_error("tensor parallelism on CUDA needs NCCL ({}), which could not be loaded: {}",
                kSoname, why ? why : "unknown error");
  }
  NcclLibrary lib{};  // the handle stays open for the process's life
  resolve(handle, "ncclGetUniqueId", lib.GetUniqueId);
  resolve(handle, "ncclCommInitRank", lib.CommInitRank);
  resolve(handle, "ncclCommDestroy", lib.CommDestroy);
  resolve(handle, "ncclAllReduce", lib.AllReduce);
  resolve(handle, "ncclAllGather", lib.AllGather);
  resolve(handle, "ncclGetErrorString", lib.GetErrorString);
  resolve(handle, "ncclGetVersion", lib.GetVersion);
  return lib;
}

}  // namespace

const NcclLibrary& nccl_library() {
  // A failed open throws out of call_once, so the next call tries again and names the error.
  static std::once_flag once;
  static NcclLibrary lib;
  std::call_once(once, [] { lib = open_library(); });
  return lib;
}

}  // namespace lmx
