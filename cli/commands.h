// Subcommands of the `lmx` tool. Each lives in its own cmd_<name>.cpp and returns the process
// exit code; argv[0] is the subcommand name.
#pragma once

namespace lmx::cli {

int run_generate(int argc, char** argv);
int run_config(int argc, char** argv);
int run_tokenize(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_shapes(int argc, char** argv);
int run_perplexity(int argc, char** argv);
int run_render_chat(int argc, char** argv);

}  // namespace lmx::cli
