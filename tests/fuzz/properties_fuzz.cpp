// serving.properties (Java properties syntax): the file parser, then the whole resolution into a
// ServingConfig with the parsed keys as the file layer.
#include <filesystem>
#include <fstream>

#include "properties/properties_file.h"
#include "properties/serving_config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lmx::properties;
  lmx::fuzz::expect_only_lmx_errors([&] { PropertiesFile::parse(lmx::fuzz::text(data, size)); });
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("lmx-fuzz-props-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::ofstream(d / "config.json") << "{}";
    return d;
  }();
  std::ofstream(dir / "serving.properties", std::ios::binary)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  lmx::fuzz::expect_only_lmx_errors([&] {
    load_serving_config(dir, Environment::from_map({}, 1), EngineCapabilities::everything());
  });
  return 0;
}
