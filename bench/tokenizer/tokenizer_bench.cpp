// Encoding speed of lmx::Tokenizer on one thread, measured the same way as
// scripts/make_tokenizer_fixtures.py --bench measures Hugging Face `tokenizers`: the whole text
// as one string, and line by line; one warm-up pass (fills the BPE cache), best of 5.
//
//   lmx_tokenizer_bench --model DIR --text FILE [--json]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace {

struct Result {
  double seconds;
  size_t tokens;
};

template <typename F>
Result best_of(F&& run) {
  run();  // warm-up
  Result best{1e30, 0};
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const size_t n = run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < best.seconds) best = {s, n};
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, text_path;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--model") && i + 1 < argc)
      model = argv[++i];
    else if (!std::strcmp(argv[i], "--text") && i + 1 < argc)
      text_path = argv[++i];
    else if (!std::strcmp(argv[i], "--json"))
      json = true;
    else {
      std::fprintf(stderr, "usage: lmx_tokenizer_bench --model DIR --text FILE [--json]\n");
      return 2;
    }
  }
  if (model.empty() || text_path.empty()) {
    std::fprintf(stderr, "usage: lmx_tokenizer_bench --model DIR --text FILE [--json]\n");
    return 2;
  }
  std::ifstream in(text_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", text_path.c_str());
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::string> lines;
  std::istringstream split(text);
  for (std::string line; std::getline(split, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  const lmx::Tokenizer tok = lmx::Tokenizer::from_model_dir(model);

  const Result whole = best_of([&] { return tok.encode(text, false).size(); });
  const Result per_line = best_of([&] {
    size_t n = 0;
    for (const auto& l : lines) n += tok.encode(l, false).size();
    return n;
  });
  const double mb = static_cast<double>(text.size()) / 1e6;
  if (json) {
    std::printf(
        "{\"bytes\": %zu, \"whole_text\": {\"seconds\": %.6f, \"tokens\": %zu, \"MB_per_s\": "
        "%.3f}, "
        "\"per_line\": {\"seconds\": %.6f, \"tokens\": %zu, \"MB_per_s\": %.3f}}\n",
        text.size(), whole.seconds, whole.tokens, mb / whole.seconds, per_line.seconds,
        per_line.tokens, mb / per_line.seconds);
  } else {
    std::printf("text: %zu bytes, %zu lines\n", text.size(), lines.size());
    std::printf("whole text: %8.3f ms  %zu tokens  %.2f MB/s  %.3f Mtok/s\n", whole.seconds * 1e3,
                whole.tokens, mb / whole.seconds, whole.tokens / whole.seconds / 1e6);
    std::printf("per line:   %8.3f ms  %zu tokens  %.2f MB/s  %.3f Mtok/s\n",
                per_line.seconds * 1e3, per_line.tokens, mb / per_line.seconds,
                per_line.tokens / per_line.seconds / 1e6);
  }
  return 0;
}
