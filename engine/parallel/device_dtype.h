// The element types that device collectives carry (NCCL and the one-shot peer all-reduce).
#pragma once

#include <cstddef>

namespace lmx {

enum class DeviceDtype { F32, F16, BF16 };

constexpr size_t device_dtype_bytes(DeviceDtype d) { return d == DeviceDtype::F32 ? 4 : 2; }

}  // namespace lmx
