#include "engine/api/serving_backend.h"

#include <unistd.h>

#include <algorithm>
#include <climits>

#include "engine/backend/cpu_backend.h"
#if LMX_HAVE_CUDA_BACKEND
#include "engine/backend/cuda/cuda_backend_factory.h"
#endif
#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/model/quantization.h"
#include "engine/parallel/mpi_communicator.h"
#include "properties/serving_config.h"
#include "smoothquant/kv_calibration.h"
#include "smoothquant/smoothquant.h"

namespace lmx {

int64_t concurrent_sequences(const properties::ServingConfig& config) {
  return config.rolling_batch == properties::RollingBatch::Disable ? config.batch_size
                                                                   : config.max_rolling_batch_size;
}

namespace {

constexpr int kBlockSize = 16;

kernels::KvDtype kv_dtype(properties::KvCacheDtype d) {
  return d == properties::KvCacheDtype::Fp8E4m3 ? kernels::KvDtype::fp8_e4m3
                                                : kernels::KvDtype::model;
}

// KV blocks for max_tokens x the sequences that run at once, in 64-bit arithmetic: a count past
// what a block id can name is an error naming both settings (max_tokens=2147483647 overflowed).
int64_t kv_blocks_wanted(const properties::ServingConfig& config, int block_size) {
  const int64_t per_sequence = (int64_t(config.max_tokens) + block_size - 1) / block_size;
  const int64_t blocks = per_sequence * concurrent_sequences(config);
  if (blocks > INT32_MAX)
    throw_error("option.max_tokens {} x {} sequences at once is a KV cache of {} blocks of {} "
                "tokens, more than {} can be addressed; lower option.max_tokens or the batch size",
                config.max_tokens, concurrent_sequences(config), blocks, block_size, INT32_MAX);
  return blocks;
}

// KV cache for max_tokens x the sequences at once, refused when it would take more than half of
// the machine's memory (named numbers instead of an out-of-memory kill later). The CPU cache is
// fp32 whatever option.kv_cache_dtype says: fp8 is emulated by rounding the stored values.
KvCacheShape plan_cpu_kv(const properties::ServingConfig& config, const DecoderDesc& desc) {
  const int64_t blocks = kv_blocks_wanted(config, kBlockSize);
  const double bytes_per_block =
      double(kBlockSize) * desc.num_layers * 2.0 * desc.kv_size() * sizeof(float);
  const double bytes = blocks * bytes_per_block;
  const double ram = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (bytes > 0.5 * ram)
    throw_error("KV cache for max_tokens {} x {} sequences at once needs {:.1f} GiB of host "
                "memory, more than half of the {:.1f} GiB here; lower option.max_tokens or "
                "option.max_rolling_batch_size (batch_size with rolling_batch=disable)",
                config.max_tokens, concurrent_sequences(config), bytes / (1 << 30), ram / (1 << 30));
  const kernels::KvDtype dtype = kv_dtype(config.kv_cache_dtype);
  lmx::logger().info("KV cache: {} blocks of {} tokens ({:.1f} MiB), dtype {}", blocks, kBlockSize,
                     bytes / (1 << 20),
                     dtype == kernels::KvDtype::fp8_e4m3
                         ? "fp8_e4m3 (emulated: rounded, stored as fp32)"
                         : "fp32");
  return {kBlockSize, int(blocks), dtype};
}

#if LMX_HAVE_CUDA_BACKEND
// option.dtype auto = the checkpoint's own dtype (bf16 stays bf16, fp16 and fp32 checkpoints run
// in fp16, the serving default of LMI).
CudaDtype cuda_dtype(properties::Dtype d, const ModelConfig& model) {
  return cuda_dtype_option(d).value_or(auto_cuda_dtype(model.dtype()));
}
#endif

}  // namespace

std::unique_ptr<Backend> make_backend(const properties::ServingConfig& config,
                                      const LoadedModel& model, int replica) {
  if (config.device == properties::Device::Cpu)
    return make_cpu_backend(model, plan_cpu_kv(config, model.desc), config.tensor_parallel_degree);
#if LMX_HAVE_CUDA_BACKEND
  CudaBackendOptions o;
  o.dtype = cuda_dtype(config.dtype, model.config);
  o.kv_dtype = kv_dtype(config.kv_cache_dtype);
  o.kv_blocks = long(kv_blocks_wanted(config, o.kv_block_size));
  o.max_sequences = int(concurrent_sequences(config));
  o.max_step_tokens = std::max(config.max_rolling_batch_prefill_tokens, o.max_sequences);
  o.cuda_graphs = config.enable_cuda_graph;
  o.fused = model.architecture->fused_policy;
  o.tensor_parallel_degree = config.tensor_parallel_degree;
  o.first_device = replica * config.tensor_parallel_degree;
  return cuda_backend_factory()(model, o);  // linked, or liblmx_cuda.so opened now (plugin)
#else
  throw_error("option.device=cuda: this build has no CUDA backend");
#endif
}

LoadedModel load_for_serving(const properties::ServingConfig& config) {
  LoadedModel model = smoothquant::load_quantized_model(
      config.model_path, linear_quant(config.quantize, config.quantize_group_size),
      smoothquant::settings_from(config));
  smoothquant::choose_kv_scales(model, config);
  return model;
}

void check_process_group_settings(const properties::ServingConfig& config) {
  if (launched_by_mpi() && config.max_replicas > 1)
    throw_error("option.max_replicas={}: replicas are not supported with tensor-parallel ranks as "
                "mpirun processes (each replica would need a group of processes of its own); "
                "serve one replica a group",
                config.max_replicas);
}

}  // namespace lmx
