// lmx_bench_calibration [--shape llama-2-7b] [--dtype fp16|bf16] [--samples 128] [--tokens 512]
//                       [--alpha A] [--json]
// smoothquant's calibration on the GPU as option.quantize=smoothquant runs it
// (smoothquant/calibration.h): the forwards over the samples with the statistics reduced on the
// GPU, then the alpha search on the GPU. Random weights of a named shape (made in GPU memory) and
// random tokens: the same work as a checkpoint's calibration, whose load of the 16-bit weights
// from disk comes on top. Prints each phase's seconds.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/device_info.h"
#include "engine/model/known_shapes.h"
#include "smoothquant/calibration.h"
#include "smoothquant/plan.h"
#include "smoothquant/smoothquant.h"

namespace {

using namespace lmx;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int run(int argc, char** argv) {
  const cli::Args args(argc, argv, {"--shape", "--dtype", "--samples", "--tokens", "--alpha"},
                       {"--json"});
  const DecoderDesc desc = known_shape(args.get("--shape").value_or("llama-2-7b"));
  const CudaDtype dtype = parse_cuda_dtype(args.get("--dtype").value_or("fp16"));
  const int samples = int(args.get_int("--samples").value_or(smoothquant::kDefaultSamples));
  const int tokens = int(args.get_int("--tokens").value_or(smoothquant::kSampleTokens));
  smoothquant::check_samples(samples, "--samples");
  if (tokens < 1 || tokens > desc.max_position_embeddings)
    throw_error("--tokens must be from 1 to the shape's {} positions, got {}",
                desc.max_position_embeddings, tokens);
  const std::optional<double> alpha = args.get_double("--alpha");

  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(1, desc.vocab_size - 1);
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(samples),
                                        std::vector<int32_t>(static_cast<size_t>(tokens)));
  for (auto& s : ids)
    for (int32_t& t : s) t = id(rng);

  const auto start = Clock::now();
  smoothquant::StatsCollector collector(desc.num_layers, smoothquant::kSearchRows);
  const std::unique_ptr<Backend> backend = make_random_cuda_backend(
      desc, smoothquant::calibration_cuda_options(dtype, 0, collector, tokens, true), 1234);
  const double made = seconds_since(start);
  const auto forwards_start = Clock::now();
  smoothquant::run_calibration(*backend, ids);
  const double forwards = seconds_since(forwards_start);
  const auto search_start = Clock::now();
  const smoothquant::Plan plan =
      smoothquant::make_plan(desc, collector.stats(), alpha, *backend->smoothing_scorer());
  const double search = seconds_since(search_start);

  nlohmann::json out = {{"device", cuda_device_name()},
                        {"shape", args.get("--shape").value_or("llama-2-7b")},
                        {"dtype", args.get("--dtype").value_or("fp16")},
                        {"samples", samples},
                        {"tokens_per_sample", tokens},
                        {"alpha", alpha ? nlohmann::json(*alpha) : nlohmann::json("searched")},
                        {"random_weights_made_s", made},
                        {"forwards_s", forwards},
                        {"alpha_search_s", search},
                        {"calibration_s", forwards + search},
                        {"layers", plan.layers.size()}};
  if (args.has("--json")) {
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  std::printf(
      "%s %s on %s: %d samples x %d tokens: forwards %.2f s, alpha %s %.2f s; "
      "calibration %.2f s (random weights made in %.2f s)\n",
      out["shape"].get<std::string>().c_str(), out["dtype"].get<std::string>().c_str(),
      out["device"].get<std::string>().c_str(), samples, tokens, forwards, alpha ? "set" : "search",
      search, forwards + search, made);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lmx_bench_calibration: %s\n", e.what());
    return 1;
  }
}
