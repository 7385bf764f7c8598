// lmx render-chat (--template FILE | --model DIR) --messages FILE.json [--tools FILE.json]
//                 [--add-generation-prompt] [--bos-token S] [--eos-token S] [--var NAME=VALUE]...
//                 [--now YYYY-MM-DDTHH:MM:SS] [--json]
// Prints the prompt a model's chat template makes of the messages, exactly what the server
// feeds the tokenizer. A template error exits 1 with its message on one stderr line.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine/chat/chat_template.h"
#include "engine/core/error.h"

namespace lmx::cli {
namespace {

constexpr const char* kUsage =
    "usage: lmx render-chat (--template FILE | --model DIR) --messages FILE.json\n"
    "                       [--tools FILE.json] [--documents FILE.json] [--add-generation-prompt]\n"
    "                       [--bos-token S] [--eos-token S] [--var NAME=VALUE]...\n"
    "                       [--now YYYY-MM-DDTHH:MM:SS] [--json]\n"
    "\n"
    "Renders chat messages with a Jinja chat template as transformers' apply_chat_template does.\n"
    "\n"
    "  --template FILE          the template text (overrides the model's)\n"
    "  --model DIR              a model directory: chat_template.jinja or tokenizer_config.json's\n"
    "                           chat_template; bos/eos and other special tokens from\n"
    "                           tokenizer_config.json\n"
    "  --messages FILE.json     a JSON list of messages\n"
    "  --tools FILE.json        a JSON list of tool schemas (default: tools = None)\n"
    "  --documents FILE.json    a JSON list of documents (default: documents = None)\n"
    "  --add-generation-prompt  end with the assistant turn's header\n"
    "  --bos-token S, --eos-token S   set bos_token / eos_token\n"
    "  --var NAME=VALUE         a template variable (chat_template_kwargs); VALUE is read as JSON\n"
    "                           when it parses (true, 3, [\"a\"]), else as a string\n"
    "  --now YYYY-MM-DDTHH:MM:SS  the local time strftime_now() formats (default: now), for\n"
    "                           reproducible renderings\n"
    "  --json                   print {\"text\": ...} instead of the raw text\n";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_error("cannot read {}", path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

nlohmann::ordered_json read_json(const std::string& flag, const std::string& path) {
  try {
    return nlohmann::ordered_json::parse(read_file(path));
  } catch (const nlohmann::ordered_json::exception& e) {
    throw_error("{} {}: {}", flag, path, e.what());
  }
}

// "YYYY-MM-DDTHH:MM:SS" as the broken-down time strftime formats (weekday and day of the year
// filled in); an impossible date or time is an error.
std::tm parse_now(const std::string& s) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, used = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6 ||
      used != static_cast<int>(s.size()) || y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 ||
      mi > 59 || sec > 59 || h < 0 || mi < 0 || sec < 0)
    throw_error("--now expects YYYY-MM-DDTHH:MM:SS, got '{}'", s);
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  const std::time_t t = timegm(&tm);  // calendar arithmetic only: no time zone applies
  std::tm out{};
  gmtime_r(&t, &out);
  if (out.tm_mday != d || out.tm_mon != mo - 1) throw_error("--now: no such date '{}'", s);
  return out;
}

}  // namespace

int run_render_chat(int argc, char** argv) {
  std::map<std::string, std::string> values;
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  bool json_out = false, add_generation_prompt = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--json") {
      json_out = true;
    } else if (a == "--add-generation-prompt") {
      add_generation_prompt = true;
    } else if (a == "--template" || a == "--model" || a == "--messages" || a == "--tools" ||
               a == "--documents" || a == "--bos-token" || a == "--eos-token" || a == "--var" ||
               a == "--now") {
      if (i + 1 >= argc) throw_error("{} needs a value", a);
      const std::string v = argv[++i];
      if (a != "--var") {
        values[a] = v;
        continue;
      }
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) throw_error("--var expects NAME=VALUE, got '{}'", v);
      const std::string text = v.substr(eq + 1);
      const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(text, nullptr, false);
      vars[v.substr(0, eq)] = parsed.is_discarded() ? nlohmann::ordered_json(text) : parsed;
    } else {
      throw_error("unknown option '{}' (see lmx render-chat --help)", a);
    }
  }
  if (!values.count("--template") && !values.count("--model"))
    throw_error("one of --template or --model is required (see lmx render-chat --help)");
  if (!values.count("--messages")) throw_error("--messages is required");

  chat::ChatOptions options;
  std::string text;
  std::optional<std::string> override_file;
  if (values.count("--template")) override_file = values["--template"];
  if (values.count("--tools")) options.tools = read_json("--tools", values["--tools"]);
  if (values.count("--documents")) options.documents = read_json("--documents", values["--documents"]);
  if (values.count("--model")) {
    options.special_tokens = chat::load_special_tokens(values["--model"]);
    const chat::ChatTemplates templates = chat::load_chat_templates(values["--model"], override_file);
    text = templates.select(std::nullopt, !options.tools.is_null());
  } else {
    text = read_file(*override_file);
  }
  if (values.count("--bos-token")) options.special_tokens["bos_token"] = values["--bos-token"];
  if (values.count("--eos-token")) options.special_tokens["eos_token"] = values["--eos-token"];
  options.add_generation_prompt = add_generation_prompt;
  options.variables = vars;
  if (values.count("--now")) options.now = parse_now(values["--now"]);
  const nlohmann::ordered_json messages = read_json("--messages", values["--messages"]);

  std::string rendered;
  try {
    rendered = chat::render_chat(text, messages, options);
  } catch (const Error& e) {
    // One line on stderr, whatever the message holds.
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';
    std::fprintf(stderr, "lmx render-chat: template error: %s\n", msg.c_str());
    return 1;
  }
  if (json_out) {
    std::cout << nlohmann::ordered_json{{"text", rendered}}.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  } else {
    std::cout << rendered;
  }
  return 0;
}

}  // namespace lmx::cli
