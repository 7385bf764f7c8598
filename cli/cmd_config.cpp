// lmx config --model-dir DIR [--gpus N] [--compact]
// Prints the resolved serving configuration (serving.properties + OPTION_* / SERVING_* / LMI and
// TGI-style environment variables + defaults) as JSON, with the source of every value. Exit
// code 1 and the full list of problems on stderr when the configuration is invalid.
#include <cstdio>
#include <iostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "args.h"
#include "commands.h"
#include "engine/core/error.h"
#include "engine/model/architecture.h"
#include "engine/model/shard.h"
#include "engine/model/model_config.h"
#include "properties/serving_config.h"

namespace lmx::cli {
namespace {

constexpr const char* kUsage =
    "usage: lmx config --model-dir DIR [--gpus N] [--compact]\n"
    "\n"
    "Prints the configuration LMX would serve DIR with, as JSON: every key's value and where it\n"
    "came from (serving.properties line, environment variable, TGI alias or default), plus\n"
    "warnings for unknown keys, and (when the directory holds a config.json) the model's\n"
    "architecture and which path it runs: kernel_injection, generic or cpu_reference, with\n"
    "the reason. Invalid or unsupported values and architectures are errors.\n"
    "\n"
    "  --model-dir DIR  model directory (holds serving.properties and/or the weights)\n"
    "  --gpus N         number of visible GPUs (default: detected from the driver and\n"
    "                   CUDA_VISIBLE_DEVICES); decides option.device=auto and\n"
    "                   tensor_parallel_degree=max\n"
    "  --compact        one-line JSON\n";

}  // namespace

int run_config(int argc, char** argv) {
  const Args args(argc, argv, {"--model-dir", "--gpus"}, {"--compact", "--help", "-h"});
  if (args.has("--help") || args.has("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string model_dir = args.require("--model-dir");
  const long long gpus = args.get_int("--gpus").value_or(-1);
  if (gpus < -1 || gpus > 4096) throw_error("--gpus expects a GPU count, got {}", gpus);

  // Warnings go to stderr so that stdout stays pure JSON (they are in the JSON too).
  spdlog::set_default_logger(spdlog::stderr_color_mt("lmx-config"));

  const auto env = properties::Environment::from_process(static_cast<int>(gpus));
  const properties::ServingConfig config =
      properties::load_serving_config(model_dir, env, properties::EngineCapabilities::this_build());
  nlohmann::json out = properties::to_json(config);
  if (std::filesystem::exists(config.model_path / "config.json")) {
    const ModelConfig model = ModelConfig::load(config.model_path);
    const std::string name = model.architecture();
    const Architecture& arch = find_architecture(name);
    const ExecutionPath path = execution_path(arch, config.device == properties::Device::Cpu);
    out["model"] = {{"architecture", arch.hf_name}, {"path", path.name}, {"path_reason", path.reason}};
    // The split at the configured degree, or why the model cannot be split so.
    try {
      const DecoderDesc desc = arch.describe(model);
      out["model"]["tensor_parallel"] = shard_plan(desc, config.tensor_parallel_degree);
    } catch (const Error& e) {
      out["model"]["tensor_parallel"] = {{"degree", config.tensor_parallel_degree}, {"error", e.what()}};
    }
  }
  std::cout << out.dump(args.has("--compact") ? -1 : 2) << "\n";
  return 0;
}

}  // namespace lmx::cli
