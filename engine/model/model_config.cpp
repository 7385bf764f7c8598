#include "engine/model/model_config.h"

#include <fstream>
#include <limits>

#include "engine/core/error.h"

namespace lmx {
namespace {

using json = nlohmann::json;

json read_json_object(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw_error("cannot read {}", path.string());
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) throw_error("{} is not valid JSON", path.string());
  if (!j.is_object()) throw_error("{} is not a JSON object", path.string());
  return j;
}

std::string key_list(std::initializer_list<const char*> keys) {
  std::string s;
  for (const char* k : keys) s += (s.empty() ? "'" : " / '") + std::string(k) + "'";
  return s;
}

std::vector<int> ids_from(const json& v, const char* key, const std::string& source) {
  std::vector<int> ids;
  if (v.is_number_integer()) {
    ids.push_back(v.get<int>());
  } else if (v.is_array()) {
    for (const json& x : v) {
      if (!x.is_number_integer()) throw_error("{}: '{}' holds a non-integer", source, key);
      ids.push_back(x.get<int>());
    }
  } else if (!v.is_null()) {
    throw_error("{}: '{}' must be an integer or a list of integers", source, key);
  }
  return ids;
}

}  // namespace

ModelConfig ModelConfig::load(const std::filesystem::path& model_dir) {
  const auto config_path = model_dir / "config.json";
  if (!std::filesystem::exists(config_path))
    throw_error("{} has no config.json (is it a Hugging Face model directory?)", model_dir.string());
  json generation = json::object();
  const auto gen_path = model_dir / "generation_config.json";
  if (std::filesystem::exists(gen_path)) generation = read_json_object(gen_path);
  return from_json(read_json_object(config_path), std::move(generation), config_path.string());
}

ModelConfig ModelConfig::from_json(json config, json generation_config, std::string source) {
  ModelConfig c;
  c.config_ = std::move(config);
  c.generation_ = generation_config.is_object() ? std::move(generation_config) : json::object();
  c.source_ = std::move(source);
  return c;
}

const json* ModelConfig::find(std::initializer_list<const char*> keys, const char** found) const {
  for (const char* k : keys) {
    auto it = config_.find(k);
    if (it != config_.end() && !it->is_null()) {
      *found = k;
      return &*it;
    }
  }
  return nullptr;
}

bool ModelConfig::has(const char* key) const {
  const char* found = nullptr;
  return find({key}, &found) != nullptr;
}

std::optional<int> ModelConfig::get_int(std::initializer_list<const char*> keys) const {
  const char* key = nullptr;
  const json* v = find(keys, &key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) throw_error("{}: '{}' must be an integer, got {}", source_, key, v->dump());
  // Not narrowed silently: an int64 or uint64 past int's range is an error, not another number.
  const bool in_range = v->is_number_unsigned()
                            ? v->get<uint64_t>() <= uint64_t(std::numeric_limits<int>::max())
                            : v->get<int64_t>() >= std::numeric_limits<int>::min() &&
                                  v->get<int64_t>() <= std::numeric_limits<int>::max();
  if (!in_range)
    throw_error("{}: '{}' = {} is out of range (at most {})", source_, key, v->dump(),
                std::numeric_limits<int>::max());
  return v->get<int>();
}

int ModelConfig::require_int(std::initializer_list<const char*> keys) const {
  auto v = get_int(keys);
  if (!v) throw_error("{}: missing integer {}", source_, key_list(keys));
  return *v;
}

std::optional<double> ModelConfig::get_double(std::initializer_list<const char*> keys) const {
  const char* key = nullptr;
  const json* v = find(keys, &key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw_error("{}: '{}' must be a number, got {}", source_, key, v->dump());
  return v->get<double>();
}

std::optional<bool> ModelConfig::get_bool(const char* key) const {
  const char* found = nullptr;
  const json* v = find({key}, &found);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw_error("{}: '{}' must be true or false, got {}", source_, key, v->dump());
  return v->get<bool>();
}

std::optional<std::string> ModelConfig::get_string(const char* key) const {
  const char* found = nullptr;
  const json* v = find({key}, &found);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw_error("{}: '{}' must be a string, got {}", source_, key, v->dump());
  return v->get<std::string>();
}

std::string ModelConfig::architecture() const {
  auto it = config_.find("architectures");
  if (it == config_.end() || !it->is_array() || it->empty() || !(*it)[0].is_string())
    throw_error("{}: missing 'architectures' (a list naming the model class)", source_);
  return (*it)[0].get<std::string>();
}

std::optional<std::string> ModelConfig::dtype() const {
  if (auto d = get_string("dtype")) return d;
  return get_string("torch_dtype");
}

std::vector<int> ModelConfig::eos_token_ids() const {
  if (generation_.contains("eos_token_id") && !generation_["eos_token_id"].is_null())
    return ids_from(generation_["eos_token_id"], "eos_token_id", "generation_config.json");
  auto it = config_.find("eos_token_id");
  return it == config_.end() ? std::vector<int>{} : ids_from(*it, "eos_token_id", source_);
}

std::optional<int> ModelConfig::bos_token_id() const {
  std::vector<int> ids;
  if (generation_.contains("bos_token_id") && !generation_["bos_token_id"].is_null())
    ids = ids_from(generation_["bos_token_id"], "bos_token_id", "generation_config.json");
  else if (config_.contains("bos_token_id"))
    ids = ids_from(config_["bos_token_id"], "bos_token_id", source_);
  if (ids.empty()) return std::nullopt;
  return ids.front();
}

}  // namespace lmx
