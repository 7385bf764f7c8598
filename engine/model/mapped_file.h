// Read-only memory map of a whole file (RAII). Weights are read from the map and converted by
// the backend (engine/model/weight_map.h materialize_f32), which then releases the pages it read.
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

// Drops the pages holding `bytes`, part of a MappedFile's map, from this process's memory: a
// weight converted to the backend's copy no longer counts in the process's resident memory, so
// loading never holds more of the checkpoint than the weights being converted. Reading them again
// is still correct (the pages come back from the file). Whole pages: neighbours' bytes on the
// first and last page are dropped too.
void release_mapped_pages(std::span<const std::byte> bytes);

}  // namespace lmx
