// `lmx`: command-line front end (generate, tokenize, config, bench, ...).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"generate", lmx::cli::run_generate, "generate tokens from a model directory"},
    {"config", lmx::cli::run_config, "print the resolved serving configuration as JSON"},
    {"tokenize", lmx::cli::run_tokenize, "encode text (or decode ids) with a model's tokenizer"},
    {"bench", lmx::cli::run_bench, "prefill / decode speed on the GPU (random weights or a model)"},
    {"shapes", lmx::cli::run_shapes, "known benchmark shapes, or one's config.json"},
    {"perplexity", lmx::cli::run_perplexity, "perplexity of a model on a text file (paragraphs)"},
    {"render-chat", lmx::cli::run_render_chat, "render chat messages with a model's chat template"},
};

void print_usage() {
  std::fprintf(stderr, "usage: lmx <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(stderr, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(stderr, "\n`lmx <command> --help` describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string_view name = argv[1];
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "lmx %s: error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "lmx: unknown command '%s'\n", argv[1]);
  print_usage();
  return 2;
}
