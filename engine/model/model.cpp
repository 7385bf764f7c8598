#include "engine/model/model.h"

#include <spdlog/spdlog.h>

namespace lmx {

LoadedModel load_model(const std::filesystem::path& model_dir) {
  LoadedModel m;
  m.dir = model_dir;
  m.config = ModelConfig::load(model_dir);
  m.architecture = &find_architecture(m.config.architecture());
  m.desc = m.architecture->describe(m.config);
  m.checkpoint = std::make_unique<Checkpoint>(Checkpoint::open(model_dir));
  m.weights = resolve_weights(*m.checkpoint, m.desc, m.architecture->tensor_names(m.desc));
  spdlog::info("loaded {} from {}: {} layers, hidden {}, {} heads / {} kv heads, vocab {}",
               m.desc.architecture, model_dir.string(), m.desc.num_layers, m.desc.hidden_size,
               m.desc.num_heads, m.desc.num_kv_heads, m.desc.vocab_size);
  return m;
}

}  // namespace lmx
