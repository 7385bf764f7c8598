// lmx-server [--model-dir DIR] [--port N] [--plugin PATH] [--host ADDR] [--model-name NAME]
//            [--max-body-bytes N] [--threads N] [--drain-timeout S] [--read-timeout S]
//            [--write-timeout S] [--max-connections N] [--overrides JSON]
// Loads the LMX plugin with dlopen (never linked), loads the model in the background (GET /ping
// says "loading" meanwhile) and serves SageMaker, DJL and OpenAI-style HTTP. See docs/serving.md.
// Under mpirun only process 0 serves; the others run their tensor-parallel rank
// (docs/tensor-parallel.md).
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "container/log_format.h"
#include "container/process_role.h"
#include "container/server.h"
#include "plugin/json_bounds.h"

namespace fs = std::filesystem;
using lmx::server::ServerOptions;

namespace {

void usage(std::ostream& out) {
  out << "usage: lmx-server [--model-dir DIR] [--port N] [--plugin PATH] [--host ADDR]\n"
         "                  [--model-name NAME] [--max-body-bytes N] [--threads N]\n"
         "                  [--drain-timeout SECONDS] [--read-timeout SECONDS]\n"
         "                  [--write-timeout SECONDS] [--max-connections N] [--overrides JSON]\n"
         "                  [--tensor-parallel-degree N|max]\n"
         "defaults: --model-dir /opt/ml/model --port 8080 (or $SAGEMAKER_BIND_TO_PORT)\n"
         "          --plugin <dir of this binary>/../lib/liblmx.so\n";
}

// The plugin next to the binary: ../lib/liblmx.so (build tree and install layout alike).
std::string default_plugin() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  fs::path exe =
      n > 0 ? fs::path(std::string(buf, static_cast<size_t>(n))) : fs::path("lmx-server");
  fs::path dir = exe.parent_path();
  for (const char* name : {"liblmx.so", "liblmx_plugin.so"}) {
    for (const fs::path& candidate : {dir / ".." / "lib" / name, dir / name}) {
      if (fs::exists(candidate)) return fs::weakly_canonical(candidate).string();
    }
  }
  return (dir / ".." / "lib" / "liblmx.so").string();
}

long parse_number(const std::string& flag, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi) {
    std::cerr << "lmx-server: " << flag << " must be a number in [" << lo << ", " << hi
              << "], got '" << v << "'\n";
    std::exit(2);
  }
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  lmx::server::use_one_line_logs();
  ServerOptions opt;
  if (const char* p = std::getenv("SAGEMAKER_BIND_TO_PORT")) {
    opt.port = static_cast<int>(parse_number("SAGEMAKER_BIND_TO_PORT", p, 0, 65535));
  }
  std::string overrides;
  std::string tensor_parallel_degree;  // --tensor-parallel-degree: an override like any other
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "lmx-server: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage(std::cout);
      return 0;
    } else if (a == "--model-dir") {
      opt.model_dir = value();
    } else if (a == "--port") {
      opt.port = static_cast<int>(parse_number(a, value(), 0, 65535));
    } else if (a == "--plugin") {
      opt.plugin_path = value();
    } else if (a == "--host") {
      opt.host = value();
    } else if (a == "--model-name") {
      opt.model_name = value();
    } else if (a == "--max-body-bytes") {
      opt.max_body_bytes = static_cast<size_t>(parse_number(a, value(), 1, 1L << 31));
    } else if (a == "--threads") {
      opt.threads = static_cast<int>(parse_number(a, value(), 1, 1024));
    } else if (a == "--drain-timeout") {
      opt.drain_timeout_s = static_cast<int>(parse_number(a, value(), 0, 86400));
    } else if (a == "--read-timeout") {
      opt.read_timeout_s = static_cast<int>(parse_number(a, value(), 1, 86400));
    } else if (a == "--write-timeout") {
      opt.write_timeout_s = static_cast<int>(parse_number(a, value(), 1, 86400));
    } else if (a == "--max-connections") {
      opt.max_connections = static_cast<int>(parse_number(a, value(), 1, 1 << 24));
    } else if (a == "--overrides") {
      overrides = value();
    } else if (a == "--tensor-parallel-degree") {
      tensor_parallel_degree = value();
    } else {
      std::cerr << "lmx-server: unknown argument '" << a << "'\n";
      usage(std::cerr);
      return 2;
    }
  }
  if (!tensor_parallel_degree.empty()) {
    nlohmann::json o = nlohmann::json::object();
    if (!overrides.empty() &&
        lmx::json_bounds::parse(overrides, o) != lmx::json_bounds::ParseStatus::Ok) {
      o = nullptr;
    }
    if (!o.is_object()) {
      std::cerr << "lmx-server: --overrides must be a JSON object of property keys to values\n";
      return 2;
    }
    o["option.tensor_parallel_degree"] = tensor_parallel_degree;
    overrides = o.dump();
  }
  if (opt.plugin_path.empty()) opt.plugin_path = default_plugin();
  if (opt.model_name.empty()) {
    fs::path p = fs::path(opt.model_dir).lexically_normal();
    opt.model_name =
        p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
    if (opt.model_name.empty()) opt.model_name = "model";
  }

  lmx::server::PluginApi api;
  try {
    api = lmx::server::PluginApi::load(opt.plugin_path);
  } catch (const std::exception& e) {
    std::cerr << "lmx-server: " << e.what() << "\n";
    return 1;
  }
  // Under mpirun only process 0 serves; the others run their rank (container/process_role.h).
  lmx::server::ProcessRole role;
  try {
    role = lmx::server::process_role(api);
  } catch (const std::exception& e) {
    std::cerr << "lmx-server: " << e.what() << "\n";
    return 1;
  }
  if (role.follower()) {
    return lmx::server::run_follower_process(api, role, opt.model_dir, overrides);
  }
  if (role.leads_group()) {
    opt.exit_if_model_fails = true;
    spdlog::info("process 0 of {} started by mpirun: serving; processes 1-{} run their "
                 "tensor-parallel ranks",
                 role.processes, role.processes - 1);
  }
  lmx::server::Model model(api, opt.model_dir, opt.model_name);
  lmx::server::ServerContext ctx;
  ctx.options = opt;
  ctx.model = &model;
  model.start_loading(overrides);
  try {
    return lmx::server::serve(ctx);
  } catch (const std::exception& e) {
    std::cerr << "lmx-server: " << e.what() << "\n";
    return 1;
  }
}
