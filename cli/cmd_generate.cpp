// lmx generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3) [--max-new-tokens N]
//              [--device cpu|cuda] [--greedy | --temperature T --top-k K --top-p P --seed S]
//              [--repetition-penalty R] [--ignore-eos] [--json] [--dump-logits]
//              [--tensor-parallel-degree N]   (cpu: ranks as threads, or one a process under mpirun)
//              [--quantize dynamic_int8|smoothquant|fp8 ...]   (int8 weights)
//              [--report-load]   (stderr: load time and peak host RSS)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "args.h"
#include "commands.h"
#include "device_flags.h"
#include "quant_flags.h"
#include "engine/core/error.h"
#include "engine/generate/generator.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"

namespace lmx::cli {
namespace {

constexpr const char* kUsage =
    "usage: lmx generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3) [--max-new-tokens N]\n"
    "                    [--device cpu|cuda [--dtype fp16|bf16|fp32]] [--greedy | --temperature T\n"
    "                    --top-k K --top-p P"
    " --seed S] [--repetition-penalty R] [--ignore-eos] [--json]\n"
    "                    [--dump-logits] [--verbose] [--report-load] [--tensor-parallel-degree N]\n"
    "                    [--quantize dynamic_int8|smoothquant|fp8 ...] (see below)\n"
    "  sampling without --seed uses a random seed\n"
    "  --dump-logits adds last_prompt_logits and step_logits (the fp32 logits of the next 4\n"
    "  draws: entry i chose generated token i + 1) to the --json output\n"
    "  --tensor-parallel-degree N splits the model over N ranks (cpu: threads; cuda: one GPU a\n"
    "  rank over NCCL; started by mpirun -np N: one rank a process, process 0 prints)\n"
    "  --report-load prints the load time and the process's peak host RSS on stderr\n";

// Decode steps whose logits --dump-logits prints (the parity fixtures compare as many).
constexpr int kDumpedDecodeSteps = 4;

SamplingParams sampling_from(const Args& args) {
  SamplingParams s;
  const bool any_sampling = args.has("--temperature") || args.has("--top-k") ||
                            args.has("--top-p") || args.has("--seed");
  if (args.has("--greedy") && any_sampling)
    throw_error("--greedy cannot be combined with --temperature/--top-k/--top-p/--seed");
  s.greedy = !any_sampling;
  s.temperature = float(args.get_double("--temperature").value_or(1.0));
  s.top_k = int(args.get_int("--top-k").value_or(0));
  s.top_p = float(args.get_double("--top-p").value_or(1.0));
  if (auto seed = args.get_int("--seed")) s.seed = uint64_t(*seed);  // else a random one
  s.repetition_penalty = float(args.get_double("--repetition-penalty").value_or(1.0));
  s.validate();
  return s;
}

bool has_tokenizer_files(const std::string& dir) {
  namespace fs = std::filesystem;
  return fs::exists(fs::path(dir) / "tokenizer.json") ||
         (fs::exists(fs::path(dir) / "vocab.json") && fs::exists(fs::path(dir) / "merges.txt"));
}

// One line on stderr: the seconds from reading the checkpoint to every rank's weights on its
// device, and the process's peak resident memory so far (every rank that is a thread of it).
void report_load(std::chrono::steady_clock::time_point start) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);  // ru_maxrss: KiB on Linux
  std::fprintf(stderr, "load: %.2f s, peak host RSS %.3f GiB\n", seconds,
               double(usage.ru_maxrss) / (1024.0 * 1024.0));
}

}  // namespace

int run_generate(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(kQuantUsage, stdout);
      return 0;
    }
  const Args args(argc, argv,
                  with_quant_flags({"--model", "--prompt", "--prompt-ids", "--max-new-tokens", "--device", "--dtype",
                   "--temperature", "--top-k", "--top-p", "--seed", "--repetition-penalty",
                   "--tensor-parallel-degree"}),
                  {"--greedy", "--ignore-eos", "--json", "--dump-logits", "--verbose", "--report-load"});
  spdlog::set_level(args.has("--verbose") ? spdlog::level::info : spdlog::level::warn);
  const std::string model_dir = args.require("--model");
  if (args.has("--prompt") == args.has("--prompt-ids"))
    throw_error("give exactly one of --prompt TEXT or --prompt-ids 1,2,3");
  const DeviceChoice device = device_from_args(args);

  // The tokenizer is needed for --prompt and for the output text; a model directory without one
  // still runs with --prompt-ids (text is then null).
  std::optional<Tokenizer> tokenizer;
  if (args.has("--prompt") || has_tokenizer_files(model_dir))
    tokenizer = Tokenizer::from_model_dir(model_dir);
  GenerationRequest request;
  request.prompt = args.has("--prompt") ? tokenizer->encode(*args.get("--prompt"))
                                        : Args::parse_int_list("--prompt-ids", *args.get("--prompt-ids"));
  request.params.max_new_tokens = int(args.get_int("--max-new-tokens").value_or(30));
  request.params.ignore_eos = args.has("--ignore-eos");
  request.params.sampling = sampling_from(args);
  request.params.return_prompt_logits = args.has("--dump-logits");
  if (args.has("--dump-logits")) request.params.return_step_logits = kDumpedDecodeSteps;

  const auto load_start = std::chrono::steady_clock::now();
  const LoadedModel model = load_quantized(model_dir, quant_from_args(args));
  const int tokens = int(request.prompt.size()) + request.params.max_new_tokens;
  const long long degree = args.get_int("--tensor-parallel-degree").value_or(1);
  if (degree < 1 || degree > 4096)
    throw_error("--tensor-parallel-degree must be a positive rank count, got {}", degree);
  const std::unique_ptr<Backend> backend =
      make_one_sequence_backend(model, device, tokens, int(degree));
  if (!backend) return 0;  // a process of an mpirun group other than 0: the leader has finished
  if (args.has("--report-load")) report_load(load_start);
  Generator generator(*backend);
  const GenerationResult result = generator.generate(std::span(&request, 1)).front();

  if (args.has("--json")) {
    nlohmann::json out;
    out["prompt_ids"] = request.prompt;
    out["token_ids"] = result.tokens;
    if (tokenizer)
      out["text"] = tokenizer->decode(result.tokens, /*skip_special_tokens=*/true);
    else
      out["text"] = nullptr;  // no tokenizer files in the model directory
    out["finish_reason"] = finish_reason_name(result.finish);
    if (args.has("--dump-logits")) {
      out["last_prompt_logits"] = result.prompt_logits;
      out["step_logits"] = result.step_logits;
    }
    std::cout << out.dump() << "\n";
  } else if (tokenizer) {
    std::cout << tokenizer->decode(result.tokens, /*skip_special_tokens=*/true) << "\n";
  } else {
    for (size_t i = 0; i < result.tokens.size(); ++i)
      std::cout << (i ? "," : "") << result.tokens[i];
    std::cout << "\n";
  }
  return 0;
}

}  // namespace lmx::cli
