// The plugin's CUDA loader (plugin/cuda_backend_loader.cpp) in a program of its own, for
// tests/plugin/cuda_on_demand_test.py: a CPU-only CI machine cannot reach it through lmx_create
// (option.device=cuda is refused there when no GPU is visible), so this calls it directly.
// Built into the library directory, beside liblmx_cuda.so, where the loader looks.
//
//   cuda_loader_probe MODEL_DIR   prints one JSON object:
//   {"mapped_before": [...], "load": "ok" | error, "backend": "ok" | error | null,
//    "mapped_after": [...]}       (the CUDA libraries mapped into the process at each point)
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/cuda/cuda_backend_factory.h"
#include "engine/model/model.h"

namespace {

nlohmann::json cuda_mapped() {
  std::ifstream in("/proc/self/maps");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json out = nlohmann::json::array();
  for (const char* lib : {"libcudart", "libcublas", "libcublasLt", "libnccl"}) {
    if (text.str().find(std::string("/") + lib) != std::string::npos) out.push_back(lib);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: cuda_loader_probe MODEL_DIR\n";
    return 2;
  }
  nlohmann::json out;
  out["mapped_before"] = cuda_mapped();
  out["backend"] = nullptr;
  try {
    const lmx::CudaBackendFactory factory = lmx::cuda_backend_factory();
    out["load"] = "ok";
    try {
      const lmx::LoadedModel model = lmx::load_model(argv[1]);
      lmx::CudaBackendOptions opts;
      opts.kv_blocks = 64;
      opts.reserve_bytes = 0;
      out["backend"] = factory(model, opts) ? "ok" : "null";
    } catch (const std::exception& e) {
      out["backend"] = e.what();
    }
  } catch (const std::exception& e) {
    out["load"] = e.what();
  }
  out["mapped_after"] = cuda_mapped();
  std::cout << out.dump() << "\n";
  return 0;
}
