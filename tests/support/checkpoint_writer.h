// Test support: writes safetensors files and model directories, including deliberately malformed
// ones, so loader tests make their own inputs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lmx::testing {

struct TensorSpec {
  std::string dtype = "F32";  // written as F32 data when "F32"; raw bytes otherwise
  std::vector<int64_t> shape;
  std::vector<float> values;  // F32 only; empty = zeros
  std::vector<uint8_t> bytes = {};  // one-byte dtypes (F8_E4M3, U8, ...): the data; empty = zeros
};

// Serialises tensors into safetensors bytes (header + data) with an optional __metadata__.
std::string safetensors_bytes(const std::map<std::string, TensorSpec>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

void write_file(const std::filesystem::path& path, const std::string& bytes);

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Tensors of a tiny Llama-style model for `config` (hidden, layers, heads, kv heads, inter,
// vocab), with deterministic pseudo-random values.
std::map<std::string, TensorSpec> tiny_llama_tensors(const nlohmann::json& config);
nlohmann::json tiny_llama_config();

}  // namespace lmx::testing
