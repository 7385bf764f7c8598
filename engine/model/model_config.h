// Typed, validating access to a model directory's config.json (and generation_config.json).
// Every missing or mistyped field is an error that names the file and the key.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lmx {

class ModelConfig {
 public:
  static ModelConfig load(const std::filesystem::path& model_dir);
  static ModelConfig from_json(nlohmann::json config, nlohmann::json generation_config,
                               std::string source = "config.json");

  const nlohmann::json& raw() const { return config_; }
  const nlohmann::json& generation() const { return generation_; }

  // The first key present (aliases such as {"hidden_size", "n_embd"}); error when none is.
  int require_int(std::initializer_list<const char*> keys) const;
  std::optional<int> get_int(std::initializer_list<const char*> keys) const;
  std::optional<double> get_double(std::initializer_list<const char*> keys) const;
  std::optional<bool> get_bool(const char* key) const;
  std::optional<std::string> get_string(const char* key) const;
  bool has(const char* key) const;  // present and not null

  std::string architecture() const;  // architectures[0]
  // Checkpoint dtype: transformers 5's `dtype` or the legacy `torch_dtype` ("float32", ...).
  std::optional<std::string> dtype() const;
  // Token id lists accept an int or a list (eos_token_id may be either); generation_config wins.
  std::vector<int> eos_token_ids() const;
  std::optional<int> bos_token_id() const;

  const std::string& source() const { return source_; }

 private:
  const nlohmann::json* find(std::initializer_list<const char*> keys, const char** found) const;

  nlohmann::json config_;
  nlohmann::json generation_;
  std::string source_;
};

}  // namespace lmx
