#include "device_flags.h"

#include <algorithm>

#include "engine/backend/cpu_backend.h"
#if LMX_HAVE_CUDA_BACKEND
#include "engine/backend/cuda/cuda_backend.h"
#endif
#include "engine/core/error.h"

namespace lmx::cli {

DeviceChoice device_from_args(const Args& args) {
  DeviceChoice d;
  const std::string device = args.get(kDeviceFlag).value_or("cpu");
  if (device != "cpu" && device != "cuda")
    throw_error("--device must be cpu or cuda, got '{}'", device);
  d.cuda = device == "cuda";
  if (args.has(kDtypeFlag) && !d.cuda)
    throw_error("--dtype applies to --device cuda; the CPU backend computes in fp32");
  d.dtype = args.get(kDtypeFlag).value_or("fp16");
  return d;
}

std::unique_ptr<Backend> make_one_sequence_backend(const LoadedModel& model, const DeviceChoice& d,
                                                   int tokens, int degree) {
  constexpr int kBlockSize = 16;
  const int blocks = (std::max(tokens, 1) + kBlockSize - 1) / kBlockSize;
  if (!d.cuda) return make_cpu_backend(model, {kBlockSize, blocks}, degree);
#if LMX_HAVE_CUDA_BACKEND
  CudaBackendOptions o;
  o.dtype = parse_cuda_dtype(d.dtype);
  o.kv_block_size = kBlockSize;
  o.kv_blocks = blocks;
  o.max_step_tokens = std::max(tokens, 16);
  o.max_sequences = 1;
  o.fused = model.architecture->fused_policy;
  o.tensor_parallel_degree = degree;
  return make_cuda_backend(model, o);
#else
  throw_error("--device cuda: this build has no CUDA backend (configure with CUDA)");
#endif
}

}  // namespace lmx::cli
