#include "properties/engine_capabilities.h"

namespace lmx::properties {

// ---- the table: update this when the engine learns something new ------------------------------
EngineCapabilities EngineCapabilities::this_build() {
  EngineCapabilities c;
  c.devices = {Device::Cpu};         // CUDA backend: in progress
  c.dtypes = {Dtype::Fp32};          // fp16/bf16: with the CUDA backend
  c.max_tensor_parallel_degree = 1;  // NCCL tensor parallelism: not yet
  c.quantize = {};                   // dynamic_int8 / smoothquant: not yet
  c.cuda_graphs = false;
  c.rolling_batch = {RollingBatch::Auto, RollingBatch::Disable};
  c.tasks = {"text-generation"};
  return c;
}

EngineCapabilities EngineCapabilities::everything() {
  EngineCapabilities c;
  c.devices = {Device::Cpu, Device::Cuda};
  c.dtypes = {Dtype::Fp32, Dtype::Fp16, Dtype::Bf16};
  c.max_tensor_parallel_degree = 1 << 20;
  c.quantize = {Quantize::DynamicInt8, Quantize::SmoothQuant};
  c.cuda_graphs = true;
  c.rolling_batch = {RollingBatch::Auto, RollingBatch::Disable};
  c.tasks = {"text-generation"};
  return c;
}

}  // namespace lmx::properties
