// lmx perplexity --model DIR --file TEXT [--device cpu|cuda] [--dtype fp16|bf16|fp32]
//                [--quantize dynamic_int8 [--quantize-group-size N] |
//                 --quantize smoothquant [--smoothquant-alpha A]] [--json] [--verbose]
// The perplexity of a model on a text (protocol in perplexity.h and docs/quantization.md): how
// the quality of dynamic_int8 and smoothquant is measured against the full-precision model.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "args.h"
#include "commands.h"
#include "perplexity.h"
#include "device_flags.h"
#include "quant_flags.h"
#include "engine/core/error.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"

namespace lmx::cli {
namespace {

constexpr const char* kUsage =
    "usage: lmx perplexity --model DIR --file TEXT [--device cpu|cuda [--dtype fp16|bf16|fp32]]\n"
    "                      [--quantize dynamic_int8|smoothquant|fp8 ...] [--json] [--verbose]\n"
    "  splits TEXT into paragraphs at blank lines, encodes each with the tokenizer's special\n"
    "  tokens (BOS), truncates it to the model's context and sums the negative log-likelihood\n"
    "  (natural log) of every predicted token; prints paragraphs, tokens, nll and\n"
    "  ppl = exp(nll / tokens). --json prints {\"paragraphs\", \"tokens\", \"nll\", \"ppl\"}.\n";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cannot read --file {}: no such readable file", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// "perplexity [#####.....] 12/40 paragraphs" on stderr, redrawn in place (terminals only).
void draw_progress(size_t done, size_t total) {
  constexpr size_t kWidth = 30;
  const size_t filled = total ? done * kWidth / total : kWidth;
  std::fprintf(stderr, "\rperplexity [%s%s] %zu/%zu paragraphs", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done, total);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace

int run_perplexity(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(kQuantUsage, stdout);
      return 0;
    }
  const Args args(argc, argv,
                  with_quant_flags({"--model", "--file", "--device", "--dtype"}),
                  {"--json", "--verbose"});
  spdlog::set_level(args.has("--verbose") ? spdlog::level::info : spdlog::level::warn);
  const std::string model_dir = args.require("--model");
  const DeviceChoice device = device_from_args(args);
  const QuantChoice quant = quant_from_args(args);

  const std::vector<std::string> paragraphs = split_paragraphs(read_text(args.require("--file")));
  if (paragraphs.empty())
    throw_error("--file {} holds no text (only whitespace): nothing to score", *args.get("--file"));
  std::optional<Tokenizer> tokenizer;
  try {
    tokenizer = Tokenizer::from_model_dir(model_dir);
  } catch (const Error& e) {
    throw_error("perplexity encodes text with the model's tokenizer: {}", e.what());
  }
  const LoadedModel model = load_quantized(model_dir, quant);
  const size_t context = size_t(model.desc.max_position_embeddings);
  std::vector<std::vector<int32_t>> ids;
  size_t longest = 1, truncated = 0;
  for (const std::string& p : paragraphs) {
    ids.push_back(tokenizer->encode(p));
    if (ids.back().size() > context) {
      ids.back().resize(context);
      ++truncated;
    }
    longest = std::max(longest, ids.back().size());
  }
  if (truncated)  // stderr: stdout holds only the result
    std::fprintf(stderr, "lmx perplexity: %zu paragraph(s) truncated to the model's context of %zu tokens\n",
                 truncated, context);

  const std::unique_ptr<Backend> backend = make_one_sequence_backend(model, device, int(longest));
  const bool bar = isatty(STDERR_FILENO) != 0;
  const PerplexityResult r =
      score_paragraphs(*backend, ids, bar ? draw_progress : std::function<void(size_t, size_t)>{});
  if (r.tokens == 0)
    throw_error("--file {}: no paragraph has two tokens, so no token is predicted",
                *args.get("--file"));

  if (args.has("--json")) {
    nlohmann::ordered_json out;
    out["paragraphs"] = r.paragraphs;
    out["tokens"] = r.tokens;
    out["nll"] = r.nll;
    out["ppl"] = r.ppl();
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("paragraphs %lld  tokens %lld  nll %.6f  ppl %.6f\n", (long long)r.paragraphs,
                (long long)r.tokens, r.nll, r.ppl());
  }
  return 0;
}

}  // namespace lmx::cli
