// Environment variables -> property keys, the way LMI containers read them.
//
//   OPTION_<NAME>            -> option.<name>  (lower-cased)              layer: Option
//   SERVING_<NAME>           -> <name>         (lower-cased, server keys) layer: Option
//   HF_MODEL_ID              -> option.model_id                           layer: Named
//   HF_REVISION              -> option.revision                           layer: Named
//   TENSOR_PARALLEL_DEGREE   -> option.tensor_parallel_degree (N or max)  layer: Named
//   HF_TASK                  -> option.task                               layer: Named
//   HF_MODEL_TRUST_REMOTE_CODE, HF_TRUST_REMOTE_CODE -> option.trust_remote_code  layer: Named
//   TGI-style aliases                                                     layer: Alias
//     SM_NUM_GPUS -> option.tensor_parallel_degree, HF_MODEL_QUANTIZE -> option.quantize,
//     MAX_BATCH_SIZE -> option.max_rolling_batch_size, MAX_CONCURRENT_REQUESTS -> job_queue_size,
//     ENABLE_CUDA_GRAPHS -> option.enable_cuda_graph, MAX_TOTAL_TOKENS -> option.max_tokens,
//     MAX_BATCH_PREFILL_TOKENS -> option.max_rolling_batch_prefill_tokens
//
// Precedence (docs/configuration.md): serving.properties > Option > Named > Alias > defaults.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace lmx::properties {

// The process environment as seen by configuration: variables plus the number of GPUs visible
// to this process (injected so tests and CUDA-less builds control what `max` means).
struct Environment {
  std::map<std::string, std::string> vars;
  int gpu_count = 0;

  // Snapshot of `environ`. gpu_count < 0 means: estimate it with visible_gpu_count().
  static Environment from_process(int gpu_count = -1);
  static Environment from_map(std::map<std::string, std::string> vars, int gpu_count = 0);

  const std::string* get(const std::string& name) const;
};

// GPUs this process may use, without linking CUDA: NVIDIA devices under /proc/driver/nvidia/gpus,
// limited by CUDA_VISIBLE_DEVICES when it is set. Callers that have CUDA should inject
// cudaGetDeviceCount() instead.
int visible_gpu_count(const Environment& env);

// Processes of the mpirun (Open MPI or PMI) group that started this one; 1 when not started by
// one. (engine/parallel/mpi_communicator.cpp reads the same variables to join the group.)
int launcher_process_count(const Environment& env);

// Layers of the environment, highest precedence first.
enum class EnvLayer { Option = 0, Named = 1, Alias = 2 };

struct EnvSetting {
  std::string key;       // property key, e.g. "option.dtype" or "job_queue_size"
  std::string value;     // raw text of the variable
  std::string variable;  // the variable it came from, e.g. "OPTION_DTYPE"
  EnvLayer layer = EnvLayer::Option;
};

// Every variable that maps onto a property key, in precedence order (layer, then the fixed order
// of the table above, then variable name). Several entries may name the same key: the first wins.
// Variables that are not configuration (PATH, HOME, ...) are not returned.
std::vector<EnvSetting> map_environment(const Environment& env);

}  // namespace lmx::properties
