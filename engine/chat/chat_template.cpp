#include "engine/chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/chat/json.h"
#include "engine/chat/template.h"

namespace lmx::chat {
namespace fs = std::filesystem;

std::string render_chat(const std::string& template_text, const nlohmann::ordered_json& messages,
                        const ChatOptions& options) {
  return render_chat(Template(template_text), messages, options);
}

std::string render_chat(const Template& tmpl, const nlohmann::ordered_json& messages,
                        const ChatOptions& options) {
  Dict vars;
  for (const auto& [name, value] : options.special_tokens) vars.set(Value(name), from_json(value));
  if (!options.variables.is_null()) {
    if (!options.variables.is_object()) throw Error("chat template variables must be a JSON object");
    for (auto it = options.variables.begin(); it != options.variables.end(); ++it)
      vars.set(Value(it.key()), from_json(it.value()));
  }
  // render(messages=..., tools=..., documents=..., add_generation_prompt=..., **kwargs)
  vars.set(Value("messages"), from_json(messages));
  vars.set(Value("tools"), from_json(options.tools));
  vars.set(Value("documents"), from_json(options.documents));
  vars.set(Value("add_generation_prompt"), Value(options.add_generation_prompt));
  return tmpl.render(vars, options.limits, options.now);
}

const std::string& ChatTemplates::select(const std::optional<std::string>& name,
                                         bool has_tools) const {
  if (named.empty()) throw Error("the model has no chat template (" + source + ")");
  if (name) {
    auto it = named.find(*name);
    if (it == named.end()) throw Error("the model has no chat template named '" + *name + "'");
    return it->second;
  }
  if (has_tools && named.count("tool_use")) return named.at("tool_use");
  auto it = named.find("default");
  if (it == named.end())
    throw Error("the model has several chat templates and none named 'default' (" + source + ")");
  return it->second;
}

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error("cannot read " + p.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

nlohmann::ordered_json read_json(const fs::path& p) {
  try {
    return nlohmann::ordered_json::parse(read_file(p));
  } catch (const nlohmann::ordered_json::exception& e) {
    throw Error(p.string() + ": " + e.what());
  }
}

void add_templates(ChatTemplates& out, const nlohmann::ordered_json& value, const std::string& where) {
  if (value.is_string()) {
    out.named["default"] = value.get<std::string>();
  } else if (value.is_array()) {
    for (const auto& t : value) {
      if (!t.is_object() || !t.contains("name") || !t.contains("template") ||
          !t["name"].is_string() || !t["template"].is_string())
        throw Error(where + ": chat_template list entries need a string name and template");
      out.named[t["name"].get<std::string>()] = t["template"].get<std::string>();
    }
  } else if (!value.is_null()) {
    throw Error(where + ": chat_template must be a string or a list of {name, template}");
  }
}

}  // namespace

ChatTemplates load_chat_templates(const std::string& model_dir,
                                  const std::optional<std::string>& override_file) {
  ChatTemplates out;
  if (override_file) {
    out.named["default"] = read_file(*override_file);
    out.source = *override_file;
    return out;
  }
  const fs::path dir(model_dir);
  if (fs::exists(dir / "chat_template.jinja")) {
    out.named["default"] = read_file(dir / "chat_template.jinja");
    out.source = (dir / "chat_template.jinja").string();
    return out;
  }
  if (fs::exists(dir / "chat_template.json")) {
    const nlohmann::ordered_json j = read_json(dir / "chat_template.json");
    if (j.is_object() && j.contains("chat_template")) {
      add_templates(out, j["chat_template"], (dir / "chat_template.json").string());
      out.source = (dir / "chat_template.json").string();
      if (!out.empty()) return out;
    }
  }
  const fs::path config = dir / "tokenizer_config.json";
  out.source = config.string();
  if (fs::exists(config)) {
    const nlohmann::ordered_json j = read_json(config);
    if (j.is_object() && j.contains("chat_template")) add_templates(out, j["chat_template"], config.string());
  }
  return out;
}

std::map<std::string, nlohmann::ordered_json> load_special_tokens(const std::string& model_dir) {
  std::map<std::string, nlohmann::ordered_json> out;
  const fs::path config = fs::path(model_dir) / "tokenizer_config.json";
  if (!fs::exists(config)) return out;
  const nlohmann::ordered_json j = read_json(config);
  if (!j.is_object()) return out;
  auto content = [](const nlohmann::ordered_json& t) -> std::optional<std::string> {
    if (t.is_string()) return t.get<std::string>();
    if (t.is_object() && t.contains("content") && t["content"].is_string())
      return t["content"].get<std::string>();
    return std::nullopt;
  };
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    if (!j.contains(key)) continue;
    if (auto s = content(j[key])) out[key] = *s;
  }
  if (j.contains("additional_special_tokens") && j["additional_special_tokens"].is_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& t : j["additional_special_tokens"])
      if (auto s = content(t)) list.push_back(*s);
    out["additional_special_tokens"] = list;
  }
  return out;
}

}  // namespace lmx::chat
