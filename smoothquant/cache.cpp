#include "smoothquant/cache.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/core/log.h"

namespace lmx::smoothquant {
namespace fs = std::filesystem;
namespace {

constexpr int kFormat = 1;

// FNV-1a, 64 bits: a cache key, not a security boundary.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const std::string& s) {
    for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // separator: ("ab", "c") != ("a", "bc")
  }
};

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

fs::path default_cache_dir() {
  if (const char* d = std::getenv("LMX_CACHE_DIR"); d && *d) return fs::path(d) / "smoothquant";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "lmx" / "smoothquant";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "lmx" / "smoothquant";
  return fs::temp_directory_path() / "lmx-smoothquant";
}

fs::path cache_file(const fs::path& cache_dir, const fs::path& model_dir, const std::string& text,
                    const std::string& what) {
  Fnv key;
  key.add(std::to_string(kFormat));
  key.add(read_all(model_dir / "config.json"));
  std::set<fs::path> files;  // sorted: the order of a directory listing is not stable
  for (const fs::directory_entry& e : fs::directory_iterator(model_dir))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") files.insert(e.path());
  for (const fs::path& f : files) {
    key.add(f.filename().string());
    key.add(std::to_string(fs::file_size(f)));
    key.add(std::to_string(fs::last_write_time(f).time_since_epoch().count()));
  }
  key.add(text);
  key.add(what);
  return cache_dir / fmt::format("{}-{:016x}.json", fs::absolute(model_dir).filename().string(), key.h);
}

std::optional<Plan> read_plan(const fs::path& file, const std::string& what) {
  if (!fs::exists(file)) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_all(file));
    if (j.at("format").get<int>() != kFormat || j.at("settings").get<std::string>() != what)
      return std::nullopt;
    Plan p;
    p.searched = j.at("searched").get<bool>();
    p.in_norm = j.at("in_norm").get<bool>();
    for (const nlohmann::json& l : j.at("layers")) {
      LayerPlan lp;
      lp.alpha = l.at("alpha").get<double>();
      lp.error = l.at("error").get<double>();
      lp.qkv = std::make_shared<const std::vector<float>>(l.at("qkv").get<std::vector<float>>());
      lp.up = l.at("shared").get<bool>()
                  ? lp.qkv
                  : std::make_shared<const std::vector<float>>(l.at("up").get<std::vector<float>>());
      p.layers.push_back(std::move(lp));
    }
    return p;
  } catch (const std::exception& e) {
    lmx::logger().warn("smoothquant: ignoring the calibration cache {}: {}", file.string(),
                       e.what());
    return std::nullopt;
  }
}

void write_plan(const fs::path& file, const std::string& what, const Plan& plan) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerPlan& l : plan.layers) {
    nlohmann::json o = {{"alpha", l.alpha}, {"error", l.error}, {"shared", l.up == l.qkv}, {"qkv", *l.qkv}};
    if (l.up != l.qkv) o["up"] = *l.up;
    layers.push_back(std::move(o));
  }
  const nlohmann::json j = {{"format", kFormat}, {"settings", what}, {"searched", plan.searched},
                            {"in_norm", plan.in_norm}, {"layers", std::move(layers)}};
  try {
    fs::create_directories(file.parent_path());
    const fs::path tmp = file.string() + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << j.dump();
      if (!f) throw std::runtime_error("write failed");
    }
    fs::rename(tmp, file);
  } catch (const std::exception& e) {
    lmx::logger().warn("smoothquant: could not write the calibration cache {}: {}", file.string(),
                       e.what());
  }
}

}  // namespace lmx::smoothquant
