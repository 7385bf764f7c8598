// lmx render-chat (--template FILE | --model DIR) --messages FILE.json [--tools FILE.json]
//                 [--add-generation-prompt] [--bos-token S] [--eos-token S] [--var NAME=VALUE]...
//                 [--now YYYY-MM-DDTHH:MM:SS] [--json]
// lmx render-chat --batch FILE.jsonl [--now ...]
// Prints the prompt a model's chat template makes of the messages, exactly what the server
// feeds the tokenizer. A template error exits 1 with its message on one stderr line. --batch
// renders one request a line in one process (the chat tests' thousands of renderings).
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <utility>
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
    "       lmx render-chat --batch FILE.jsonl [--now YYYY-MM-DDTHH:MM:SS]\n"
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
    "  --json                   print {\"text\": ...} instead of the raw text\n"
    "  --batch FILE.jsonl       one request a line: {\"template\" | \"model\", \"messages\",\n"
    "                           \"tools\", \"documents\", \"add_generation_prompt\", \"bos_token\",\n"
    "                           \"eos_token\", \"variables\"}; one line out each: {\"text\"},\n"
    "                           {\"error\"} (the template failed) or {\"failure\"} (a bad line)\n";

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

// One rendering as the options (or a --batch line) describe it.
struct RenderRequest {
  std::optional<std::string> template_file, model_dir;
  nlohmann::ordered_json messages, tools, documents;  // tools / documents: null = None
  bool add_generation_prompt = false;
  std::optional<std::string> bos_token, eos_token;
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  std::optional<std::tm> now;
};

// The template text and options of a request (reading its files: lmx::Error when one cannot be
// read or parsed).
std::pair<std::string, chat::ChatOptions> prepare(const RenderRequest& r) {
  if (!r.template_file && !r.model_dir)
    throw_error("one of --template or --model is required (see lmx render-chat --help)");
  chat::ChatOptions options;
  options.tools = r.tools;
  options.documents = r.documents;
  std::string text;
  if (r.model_dir) {
    options.special_tokens = chat::load_special_tokens(*r.model_dir);
    const chat::ChatTemplates templates = chat::load_chat_templates(*r.model_dir, r.template_file);
    text = templates.select(std::nullopt, !options.tools.is_null());
  } else {
    text = read_file(*r.template_file);
  }
  if (r.bos_token) options.special_tokens["bos_token"] = *r.bos_token;
  if (r.eos_token) options.special_tokens["eos_token"] = *r.eos_token;
  options.add_generation_prompt = r.add_generation_prompt;
  options.variables = r.variables;
  options.now = r.now;
  return {text, options};
}

// A template error's message on one line (the CLI's stderr line and a --batch "error").
std::string one_line(std::string msg) {
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  return msg;
}

std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// --batch FILE: one JSON object a line, the request's fields by name ("template" | "model",
// "messages", and optionally "tools", "documents", "add_generation_prompt", "bos_token",
// "eos_token", "variables" (an object: chat_template_kwargs)); --now applies to every line. One
// JSON line out for each line in: {"text": ...}, {"error": ...} where the template failed (its
// message, as the single mode's stderr line), or {"failure": ...} where the line itself is wrong
// (not JSON, a missing or mistyped field, an unreadable file). Exits 0 once every line is answered.
int run_batch(const std::string& path, const std::optional<std::tm>& now) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("--batch: cannot read {}", path);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    nlohmann::ordered_json out;
    try {
      const auto j = nlohmann::ordered_json::parse(line);
      if (!j.is_object()) throw_error("not a JSON object");
      RenderRequest r;
      const auto text_field = [&](const char* key) -> std::optional<std::string> {
        if (!j.contains(key)) return std::nullopt;
        if (!j[key].is_string()) throw_error("\"{}\" must be a string", key);
        return j[key].get<std::string>();
      };
      r.template_file = text_field("template");
      r.model_dir = text_field("model");
      r.bos_token = text_field("bos_token");
      r.eos_token = text_field("eos_token");
      if (!j.contains("messages")) throw_error("\"messages\" is required");
      r.messages = j["messages"];
      r.tools = j.value("tools", nlohmann::ordered_json());
      r.documents = j.value("documents", nlohmann::ordered_json());
      if (j.contains("add_generation_prompt") && !j["add_generation_prompt"].is_boolean())
        throw_error("\"add_generation_prompt\" must be true or false");
      r.add_generation_prompt = j.value("add_generation_prompt", false);
      if (j.contains("variables") && !j["variables"].is_object())
        throw_error("\"variables\" must be an object");
      r.variables = j.value("variables", nlohmann::ordered_json::object());
      r.now = now;
      const auto [text, options] = prepare(r);
      try {
        out = {{"text", chat::render_chat(text, r.messages, options)}};
      } catch (const Error& e) {
        out = {{"error", one_line(e.what())}};
      }
    } catch (const std::exception& e) {
      out = {{"failure", fmt::format("line {}: {}", number, one_line(e.what()))}};
    }
    std::cout << dump(out) << "\n";
  }
  return 0;
}

}  // namespace

int run_render_chat(int argc, char** argv) {
  std::map<std::string, std::string> values;
  RenderRequest r;
  bool json_out = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--json") {
      json_out = true;
    } else if (a == "--add-generation-prompt") {
      r.add_generation_prompt = true;
    } else if (a == "--template" || a == "--model" || a == "--messages" || a == "--tools" ||
               a == "--documents" || a == "--bos-token" || a == "--eos-token" || a == "--var" ||
               a == "--now" || a == "--batch") {
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
      r.variables[v.substr(0, eq)] = parsed.is_discarded() ? nlohmann::ordered_json(text) : parsed;
    } else {
      throw_error("unknown option '{}' (see lmx render-chat --help)", a);
    }
  }
  if (values.count("--now")) r.now = parse_now(values["--now"]);
  if (values.count("--batch")) {
    if (values.size() > 1 + values.count("--now") || r.add_generation_prompt || json_out ||
        !r.variables.empty())
      throw_error("--batch takes only --now besides: the lines carry the rest");
    return run_batch(values["--batch"], r.now);
  }
  if (values.count("--template")) r.template_file = values["--template"];
  if (values.count("--model")) r.model_dir = values["--model"];
  if (values.count("--tools")) r.tools = read_json("--tools", values["--tools"]);
  if (values.count("--documents")) r.documents = read_json("--documents", values["--documents"]);
  if (values.count("--bos-token")) r.bos_token = values["--bos-token"];
  if (values.count("--eos-token")) r.eos_token = values["--eos-token"];
  const auto [text, options] = prepare(r);  // first: it requires --template or --model
  if (!values.count("--messages")) throw_error("--messages is required");
  r.messages = read_json("--messages", values["--messages"]);
  std::string rendered;
  try {
    rendered = chat::render_chat(text, r.messages, options);
  } catch (const Error& e) {
    // One line on stderr, whatever the message holds.
    std::fprintf(stderr, "lmx render-chat: template error: %s\n", one_line(e.what()).c_str());
    return 1;
  }
  if (json_out) {
    std::cout << dump(nlohmann::ordered_json{{"text", rendered}}) << "\n";
  } else {
    std::cout << rendered;
  }
  return 0;
}

}  // namespace lmx::cli
