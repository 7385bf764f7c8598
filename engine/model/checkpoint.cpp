#include "engine/model/checkpoint.h"

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace lmx {
namespace {

namespace fs = std::filesystem;

// weight_map of model.safetensors.index.json: tensor name -> shard file name.
std::map<std::string, std::string> read_index(const fs::path& index_path) {
  std::ifstream in(index_path);
  if (!in) throw_error("cannot read {}", index_path.string());
  auto index = nlohmann::json::parse(in, nullptr, false);
  if (index.is_discarded() || !index.is_object())
    throw_error("{}: not a JSON object", index_path.string());
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    throw_error("{}: missing object 'weight_map'", index_path.string());
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string())
      throw_error("{}: weight_map['{}'] is not a file name", index_path.string(), name);
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "..")
      throw_error("{}: weight_map['{}'] = '{}' is not a file in the model directory",
                  index_path.string(), name, f);
    map[name] = f;
  }
  return map;
}

}  // namespace

Checkpoint Checkpoint::open(const fs::path& model_dir) {
  Checkpoint ckpt;
  ckpt.dir_ = model_dir;
  if (!fs::is_directory(model_dir))
    throw_error("model directory {} does not exist or is not a directory", model_dir.string());

  const fs::path index_path = model_dir / "model.safetensors.index.json";
  const fs::path single_path = model_dir / "model.safetensors";
  if (fs::exists(index_path)) {
    const auto weight_map = read_index(index_path);
    std::set<std::string> shard_names;
    for (const auto& [name, file] : weight_map) shard_names.insert(file);
    for (const std::string& shard : shard_names)
      ckpt.files_.push_back(std::make_unique<SafetensorsFile>(model_dir / shard));
    for (const auto& [name, file] : weight_map) {
      const TensorView* t = ckpt.find(name);
      if (!t || t->file->filename() != file)
        throw_error("{}: tensor '{}' is listed in {} but that shard does not hold it",
                    index_path.string(), name, file);
    }
  } else if (fs::exists(single_path)) {
    ckpt.files_.push_back(std::make_unique<SafetensorsFile>(single_path));
  } else {
    throw_error("no weights in {}: expected model.safetensors or model.safetensors.index.json "
                "(PyTorch .bin checkpoints are not supported; convert them to safetensors)",
                model_dir.string());
  }
  return ckpt;
}

const TensorView* Checkpoint::find(const std::string& name) const {
  for (const auto& f : files_) {
    auto it = f->tensors().find(name);
    if (it != f->tensors().end()) return &it->second;
  }
  for (const auto& f : files_) {
    auto alias = f->metadata().find(name);
    if (alias == f->metadata().end() || alias->second == name) continue;
    auto it = f->tensors().find(alias->second);
    if (it != f->tensors().end()) return &it->second;
  }
  return nullptr;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& f : files_)
    for (const auto& [name, view] : f->tensors()) out.push_back(name);
  return out;
}

}  // namespace lmx
