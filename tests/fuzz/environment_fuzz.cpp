// OPTION_* / SERVING_* / alias resolution: the input is NAME=VALUE lines (NUL and control bytes
// allowed in values) taken as the process environment.
#include <filesystem>
#include <fstream>
#include <map>

#include "properties/serving_config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lmx::properties;
  std::map<std::string, std::string> env;
  const std::string_view in = lmx::fuzz::text(data, size);
  size_t at = 0;
  while (at < in.size()) {
    size_t end = in.find('\n', at);
    if (end == std::string_view::npos) end = in.size();
    const std::string_view line = in.substr(at, end - at);
    if (const size_t eq = line.find('='); eq != std::string_view::npos)
      env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    at = end + 1;
  }
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("lmx-fuzz-env-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::ofstream(d / "config.json") << "{}";
    return d;
  }();
  for (const auto& caps : {EngineCapabilities::everything(), EngineCapabilities::cpu_only()})
    lmx::fuzz::expect_only_lmx_errors(
        [&] { load_serving_config(dir, Environment::from_map(env, 2), caps); });
  return 0;
}
