// A scratch model directory for configuration tests, removed when the test ends.
#pragma once

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace lmx::properties::testing {

class TempModelDir {
 public:
  TempModelDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("lmx_props_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
    path_ = std::filesystem::canonical(path_);
  }
  explicit TempModelDir(const std::string& serving_properties) : TempModelDir() {
    write("serving.properties", serving_properties);
  }
  ~TempModelDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempModelDir(const TempModelDir&) = delete;
  TempModelDir& operator=(const TempModelDir&) = delete;

  void write(const std::string& name, const std::string& text) const {
    std::ofstream out(path_ / name, std::ios::binary);
    out << text;
  }
  std::filesystem::path mkdir(const std::string& name) const {
    std::filesystem::create_directories(path_ / name);
    return path_ / name;
  }
  const std::filesystem::path& path() const { return path_; }
  std::string props() const { return (path_ / "serving.properties").string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace lmx::properties::testing
