// CUDA error checking for host code: every runtime call's status becomes an lmx::Error that
// names the call, the file and the line.
#pragma once

#include <cuda_runtime.h>

#include "engine/core/error.h"

#define LMX_CUDA_CHECK(expr)                                                              \
  do {                                                                                    \
    const cudaError_t lmx_status_ = (expr);                                               \
    if (lmx_status_ != cudaSuccess)                                                       \
      ::lmx::throw_error("{} failed at {}:{}: {}", #expr, __FILE__, __LINE__,             \
                         cudaGetErrorString(lmx_status_));                                \
  } while (0)
