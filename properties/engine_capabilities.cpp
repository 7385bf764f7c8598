#include "properties/engine_capabilities.h"

namespace lmx::properties {

// ---- the table: update this when the engine learns something new ------------------------------
EngineCapabilities EngineCapabilities::cpu_only() {
  EngineCapabilities c;
  c.devices = {Device::Cpu};
  c.dtypes = {Dtype::Fp32};
  c.cuda_graphs = false;
  c.max_tensor_parallel_degree = 1;  // no CUDA: one rank a device
  c.cpu_tensor_parallel = true;      // the CPU reference's ranks as threads
  c.quantize = {{Device::Cpu, {Quantize::DynamicInt8, Quantize::SmoothQuant, Quantize::Fp8}}};
  c.rolling_batch = {RollingBatch::Auto, RollingBatch::Disable};
  c.tasks = {"text-generation"};
  return c;
}

EngineCapabilities EngineCapabilities::this_build() {
  EngineCapabilities c = cpu_only();
#if LMX_HAVE_CUDA_BACKEND
  c.devices.insert(Device::Cuda);
  c.dtypes.insert({Dtype::Fp16, Dtype::Bf16});  // cuda only: a conflict on cpu
  c.cuda_graphs = true;
  c.max_tensor_parallel_degree = 1 << 20;  // NCCL ranks, one a GPU: the GPU count bounds it
  // dynamic_int8 per output channel (no group size); smoothquant's W8A8; fp8's E4M3 W8A8
  c.quantize[Device::Cuda] = {Quantize::DynamicInt8, Quantize::SmoothQuant, Quantize::Fp8};
#endif
  return c;
}

EngineCapabilities EngineCapabilities::everything() {
  EngineCapabilities c;
  c.devices = {Device::Cpu, Device::Cuda};
  c.dtypes = {Dtype::Fp32, Dtype::Fp16, Dtype::Bf16};
  c.max_tensor_parallel_degree = 1 << 20;
  c.cpu_tensor_parallel = true;
  c.quantize = {{Device::Cpu, {Quantize::DynamicInt8, Quantize::SmoothQuant, Quantize::Fp8}},
                {Device::Cuda, {Quantize::DynamicInt8, Quantize::SmoothQuant, Quantize::Fp8}}};
  c.cuda_graphs = true;
  c.rolling_batch = {RollingBatch::Auto, RollingBatch::Disable};
  c.tasks = {"text-generation"};
  return c;
}

}  // namespace lmx::properties
