// A safetensors file (header + data) as the loader maps it: every tensor's offsets, shapes and
// dtypes checked, and every tensor that loads converted to fp32.
#include <filesystem>
#include <fstream>

#include "engine/core/dtype.h"
#include "engine/model/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("lmx-fuzz-" + std::to_string(getpid()) + ".safetensors");
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  lmx::fuzz::expect_only_lmx_errors([&] {
    const lmx::SafetensorsFile f(file);
    std::vector<float> out;
    for (const auto& [name, view] : f.tensors()) {
      out.resize(size_t(view.numel()));
      lmx::convert_to_f32(view.dtype, view.data.data(), out.size(), out.data());
    }
  });
  return 0;
}
