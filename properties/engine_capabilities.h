// What this build of the engine can actually honour. Validation checks every configured value
// twice: is it a valid LMI value at all (else "invalid value ... allowed: ..."), and can this
// build run it (else "... is valid but not supported by this build of LMX yet").
//
// Engine owners: widen EngineCapabilities::this_build() in engine_capabilities.cpp when a
// feature lands (e.g. add Device::Cuda, Dtype::Bf16, raise max_tensor_parallel_degree).
#pragma once

#include <map>
#include <set>
#include <string>

#include "properties/config_enums.h"

namespace lmx::properties {

struct EngineCapabilities {
  std::set<Device> devices;
  std::set<Dtype> dtypes;  // Dtype::Auto is always accepted
  int max_tensor_parallel_degree = 1;  // on cuda: ranks over NCCL, one a GPU
  bool cpu_tensor_parallel = false;     // on cpu: the CPU reference's ranks as threads
  // Per device (Quantize::None is always accepted): dynamic_int8 runs on the CPU reference;
  // cuda waits for its W8A16 kernels.
  std::map<Device, std::set<Quantize>> quantize;
  bool cuda_graphs = false;
  std::set<RollingBatch> rolling_batch;
  std::set<std::string> tasks;

  // The capability table of the code in this checkout: cpu_only() plus CUDA when built with it.
  static EngineCapabilities this_build();
  // What the CPU backend alone can run (builds without CUDA; tests pin this table).
  static EngineCapabilities cpu_only();
  // Everything LMX's configuration language can express (for tests and docs).
  static EngineCapabilities everything();
};

}  // namespace lmx::properties
