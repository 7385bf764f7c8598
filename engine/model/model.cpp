#include "engine/model/model.h"

#include "engine/core/error.h"
#include "engine/core/load_deadline.h"
#include "engine/core/log.h"
#include "engine/model/quantization.h"

namespace lmx {

LoadedModel load_model(const std::filesystem::path& model_dir, const LinearQuant& quant) {
  LoadedModel m;
  m.dir = model_dir;
  m.config = ModelConfig::load(model_dir);
  check_quantizable(m.config, quant);
  m.architecture = &find_architecture(m.config.architecture());
  m.desc = m.architecture->describe(m.config);
  const auto random = m.config.raw().find("lmx_random_weights");
  if (random != m.config.raw().end()) {
    if (!random->is_object() || !random->contains("seed") || !(*random)["seed"].is_number_unsigned())
      throw_error("{}: lmx_random_weights must be an object with an unsigned integer 'seed'",
                  m.config.source());
    m.random_seed = (*random)["seed"].get<uint64_t>();
    m.weights = describe_weights(m.desc);
    lmx::logger().warn("{}: random weights (seed {}) for benchmarks, no checkpoint read",
                       model_dir.string(), *m.random_seed);
  } else {
    check_load_deadline();
    m.checkpoint = std::make_unique<Checkpoint>(Checkpoint::open(model_dir));
    check_load_deadline();
    const std::optional<CheckpointFp8> fp8 = checkpoint_fp8(m.config);
    m.weights = resolve_weights(*m.checkpoint, m.desc, m.architecture->tensor_names(m.desc),
                                fp8.has_value(), fp8 ? fp8->block : 0);
    if (fp8) {
      m.quantization = {{"method", "fp8"}, {"checkpoint", fp8->layout}};
      lmx::logger().info("{}: an fp8 checkpoint ({}): E4M3 weights and their scales loaded as "
                         "stored", model_dir.string(), fp8->layout);
      if (fp8->static_input_scales)
        lmx::logger().warn("{}: the checkpoint's static activation scales (input_scale) are not "
                           "used: activations are quantized per token at run time",
                           model_dir.string());
    }
  }
  if (quant.quantized()) request_quantization(m.weights, quant);
  lmx::logger().info("loaded {} from {}: {} layers, hidden {}, {} heads / {} kv heads, vocab {}",
                     m.desc.architecture, model_dir.string(), m.desc.num_layers, m.desc.hidden_size,
                     m.desc.num_heads, m.desc.num_kv_heads, m.desc.vocab_size);
  return m;
}

}  // namespace lmx
