// The tensors of a model directory: one model.safetensors, or shards listed in
// model.safetensors.index.json. All files stay memory-mapped for the checkpoint's lifetime.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"

namespace lmx {

class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& model_dir);

  // nullptr when absent. Names saved only as aliases in a file's __metadata__ (transformers writes
  // {"model.embed_tokens.weight": "lm_head.weight"} for deduplicated tied weights) resolve too.
  const TensorView* find(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
};

}  // namespace lmx
