// lmx tokenize --model DIR (--text TEXT | --decode IDS) [--no-special] [--json]
// Encodes TEXT with the model directory's tokenizer and prints {"ids": [...]}; with --json the
// token strings and the round-trip decode are included. --decode 1,2,3 prints {"text": "..."}.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "engine/core/error.h"
#include "engine/tokenizer/tokenizer.h"

namespace lmx::cli {
namespace {

constexpr const char* kUsage =
    "usage: lmx tokenize --model DIR (--text TEXT | --decode IDS) [--no-special] [--json]\n"
    "\n"
    "Runs the tokenizer of a Hugging Face model directory (tokenizer.json + "
    "tokenizer_config.json,\n"
    "or vocab.json + merges.txt).\n"
    "\n"
    "  --model DIR    model directory\n"
    "  --text TEXT    text to encode; prints {\"ids\": [...]}\n"
    "  --decode IDS   comma-separated ids to decode; prints {\"text\": \"...\"}\n"
    "  --no-special   encode without bos/eos and template tokens; decode skipping special tokens\n"
    "  --json         also print the token strings and the decoded text of the ids\n";

}  // namespace

int run_tokenize(int argc, char** argv) {
  const Args args(argc, argv, {"--model", "--text", "--decode"},
                  {"--no-special", "--json", "--help", "-h"});
  if (args.has("--help") || args.has("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const Tokenizer tok = Tokenizer::from_model_dir(args.require("--model"));
  const bool special = !args.has("--no-special");
  nlohmann::json out;
  if (auto ids_text = args.get("--decode")) {
    std::vector<int32_t> ids;
    for (int id : Args::parse_int_list("--decode", *ids_text)) ids.push_back(id);
    out["text"] = tok.decode(ids, !special);
  } else if (auto text = args.get("--text")) {
    const std::vector<int32_t> ids = tok.encode(*text, special);
    out["ids"] = ids;
    if (args.has("--json")) {
      nlohmann::json tokens = nlohmann::json::array();
      for (int32_t id : ids) tokens.push_back(tok.id_to_token(id));
      out["tokens"] = std::move(tokens);
      out["decoded"] = tok.decode(ids, false);
    }
  } else {
    throw_error("one of --text or --decode is required (see lmx tokenize --help)");
  }
  // Token strings may hold partial UTF-8 (byte-level pieces): replace rather than throw.
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace lmx::cli
