// Read-only memory map of a whole file (RAII). Weights are read from the map without a copy when
// their dtype is already the one the backend wants.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace lmx {

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lmx
