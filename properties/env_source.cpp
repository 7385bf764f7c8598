#include "properties/env_source.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <system_error>

extern char** environ;  // POSIX

namespace lmx::properties {
namespace {

struct NamedVar {
  const char* variable;
  const char* key;
  EnvLayer layer;
};

// Fixed variables; order within a layer decides which one wins when two name the same key.
constexpr NamedVar kNamedVars[] = {
    {"HF_MODEL_ID", "option.model_id", EnvLayer::Named},
    {"HF_REVISION", "option.revision", EnvLayer::Named},
    {"TENSOR_PARALLEL_DEGREE", "option.tensor_parallel_degree", EnvLayer::Named},
    {"HF_TASK", "option.task", EnvLayer::Named},
    {"HF_MODEL_TRUST_REMOTE_CODE", "option.trust_remote_code", EnvLayer::Named},
    {"HF_TRUST_REMOTE_CODE", "option.trust_remote_code", EnvLayer::Named},
    // TGI-style aliases that LMI containers accept.
    {"SM_NUM_GPUS", "option.tensor_parallel_degree", EnvLayer::Alias},
    {"HF_MODEL_QUANTIZE", "option.quantize", EnvLayer::Alias},
    {"MAX_BATCH_SIZE", "option.max_rolling_batch_size", EnvLayer::Alias},
    {"MAX_CONCURRENT_REQUESTS", "job_queue_size", EnvLayer::Alias},
    {"ENABLE_CUDA_GRAPHS", "option.enable_cuda_graph", EnvLayer::Alias},
    {"MAX_TOTAL_TOKENS", "option.max_tokens", EnvLayer::Alias},
    {"MAX_BATCH_PREFILL_TOKENS", "option.max_rolling_batch_prefill_tokens", EnvLayer::Alias},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

Environment Environment::from_process(int gpu_count) {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.vars.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  env.gpu_count = gpu_count >= 0 ? gpu_count : visible_gpu_count(env);
  return env;
}

Environment Environment::from_map(std::map<std::string, std::string> vars, int gpu_count) {
  Environment env;
  env.vars = std::move(vars);
  env.gpu_count = gpu_count;
  return env;
}

const std::string* Environment::get(const std::string& name) const {
  auto it = vars.find(name);
  return it == vars.end() ? nullptr : &it->second;
}

int launcher_process_count(const Environment& env) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const std::string* v = env.get(name);
    const long n = v != nullptr ? std::strtol(v->c_str(), nullptr, 10) : 0;
    if (n > 1) return int(std::min<long>(n, 1 << 20));
  }
  return 1;
}

int visible_gpu_count(const Environment& env) {
  int physical = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec), end;
       !ec && it != end; it.increment(ec))
    ++physical;
  const std::string* visible = env.get("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return physical;
  // "0,1,3" -> 3 devices; "" or "-1" or "NoDevFiles" -> none. CUDA stops at the first invalid id.
  int listed = 0;
  std::size_t pos = 0;
  while (pos <= visible->size()) {
    const std::size_t comma = visible->find(',', pos);
    const std::string item =
        visible->substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty() || item[0] == '-' || item == "NoDevFiles") break;
    ++listed;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::min(listed, physical);
}

std::vector<EnvSetting> map_environment(const Environment& env) {
  std::vector<EnvSetting> out;
  // Option layer: OPTION_* then SERVING_* (they never name the same key); vars is sorted by name.
  for (const auto& [name, value] : env.vars) {
    if (starts_with(name, "OPTION_") && name.size() > 7)
      out.push_back({"option." + lower(name.substr(7)), value, name, EnvLayer::Option});
  }
  for (const auto& [name, value] : env.vars) {
    if (starts_with(name, "SERVING_") && name.size() > 8)
      out.push_back({lower(name.substr(8)), value, name, EnvLayer::Option});
  }
  for (EnvLayer layer : {EnvLayer::Named, EnvLayer::Alias}) {
    for (const NamedVar& v : kNamedVars) {
      if (v.layer != layer) continue;
      if (const std::string* value = env.get(v.variable))
        out.push_back({v.key, *value, v.variable, v.layer});
    }
  }
  return out;
}

}  // namespace lmx::properties
