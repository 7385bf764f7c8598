// One .safetensors file: an 8-byte little-endian header length, a JSON header describing every
// tensor (dtype, shape, data_offsets relative to the data section), then the raw data.
// Opening validates the whole header against the file size, so a truncated or malformed file is
// an error that names the file and the offending entry, never a crash later.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/model/mapped_file.h"

namespace lmx {

struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;  // inside the file's memory map
  const std::filesystem::path* file = nullptr;

  int64_t numel() const;
};

std::string shape_str(std::span<const int64_t> shape);  // "[4, 64]"

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::filesystem::path& path() const { return map_->path(); }

 private:
  void check_data_layout(size_t data_bytes, const std::string& file) const;

  std::unique_ptr<MappedFile> map_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace lmx
