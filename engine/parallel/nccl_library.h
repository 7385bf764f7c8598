// NCCL, opened on first use (dlopen of libnccl.so.2) instead of linked: a process that never
// splits a model over GPUs never loads it (single-GPU serving starts without it), and a machine
// without it gets an error naming the library when a degree above 1 asks for it.
#pragma once

#include <nccl.h>

namespace lmx {

// The NCCL functions LMX calls, resolved once from libnccl.so.2.
struct NcclLibrary {
  decltype(&::ncclGetUniqueId) GetUniqueId;
  decltype(&::ncclCommInitRank) CommInitRank;
  decltype(&::ncclCommDestroy) CommDestroy;
  decltype(&::ncclAllReduce) AllReduce;
  decltype(&::ncclAllGather) AllGather;
  decltype(&::ncclGetErrorString) GetErrorString;
  decltype(&::ncclGetVersion) GetVersion;
};

// The library, opened on the first call; throws (naming libnccl.so.2 and why it failed) when it
// cannot be opened or lacks a function.
const NcclLibrary& nccl_library();

}  // namespace lmx
