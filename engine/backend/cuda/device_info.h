// Facts about the GPU for reports: name, memory in use, measured copy bandwidth.
#pragma once

#include <cstddef>
#include <string>

namespace lmx {

std::string cuda_device_name();
size_t cuda_memory_used_bytes();  // total - free, whole device
// Device-to-device copy of `bytes`, counting read + write, median of several runs (GB/s).
double measure_copy_bandwidth_gbps(size_t bytes = size_t(1) << 30);

}  // namespace lmx
