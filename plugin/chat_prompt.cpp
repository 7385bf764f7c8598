#include "plugin/chat_prompt.h"

#include <fmt/format.h>

#include "engine/chat/chat_template.h"
#include "engine/chat/interpreter.h"
#include "engine/core/log.h"
#include "plugin/json_bounds.h"
#include "plugin/tool_choice.h"

namespace lmx::plugin {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Text parts of a content list joined by newlines, as OpenAI-compatible servers give them to
// templates that expect strings; other part types need a multimodal model.
ordered_json flatten_content(const ordered_json& content, const std::string& field) {
  if (content.is_string() || content.is_null()) return content;
  if (!content.is_array())
    throw_field_error(field, "must be a string, a list of content parts or null");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part = fmt::format("{}[{}]", field, i);
    const ordered_json& p = content[i];
    if (!p.is_object())
      throw_field_error(part, "must be an object {\"type\": \"text\", \"text\": ...}");
    auto type = p.find("type");
    if (type == p.end() || *type != "text") {
      throw_field_error(part + ".type",
                        fmt::format("only \"text\" parts are supported, got {}",
                                    type == p.end() ? "none" : json_bounds::quote(json(*type))));
    }
    auto t = p.find("text");
    if (t == p.end() || !t->is_string()) throw_field_error(part + ".text", "must be a string");
    if (i > 0) text += "\n";
    text += t->get<std::string>();
  }
  return text;
}

ordered_json checked_messages(const ordered_json& messages) {
  if (!messages.is_array() || messages.empty())
    throw_field_error("messages", "must be a non-empty list");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string field = fmt::format("messages[{}]", i);
    ordered_json m = messages[i];
    if (!m.is_object()) throw_field_error(field, "must be an object with \"role\" and \"content\"");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw_field_error(field + ".role", "must be a string");
    if (auto c = m.find("content"); c != m.end()) *c = flatten_content(*c, field + ".content");
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

std::string tool_call_parser_of(const std::string& text) {
  if (text.find("<tool_call>") != std::string::npos) return "hermes";
  if (text.find("[TOOL_CALLS]") != std::string::npos) return "mistral";
  if (text.find("<|python_tag|>") != std::string::npos || text.find("ipython") != std::string::npos)
    return "llama3_json";
  return "";
}

std::shared_ptr<const ChatSetup> load_chat_setup(const std::string& model_dir,
                                                 const std::optional<std::string>& override_file,
                                                 const std::string& parser) {
  auto setup = std::make_shared<ChatSetup>();
  try {
    chat::ChatTemplates t = chat::load_chat_templates(model_dir, override_file);
    setup->source = t.source;
    for (const auto& [name, text] : t.named) {
      try {
        setup->templates[name] = std::make_shared<const chat::Template>(text);
      } catch (const std::exception& e) {
        setup->template_errors[name] = e.what();
        lmx::logger().warn("chat template '{}' ({}) does not compile: {}", name, t.source,
                           e.what());
      }
    }
    setup->special_tokens = chat::load_special_tokens(model_dir);
    setup->tool_call_parser = parser;
    if (parser.empty()) {
      auto it = t.named.find("tool_use");
      if (it == t.named.end()) it = t.named.find("default");
      if (it != t.named.end()) setup->tool_call_parser = tool_call_parser_of(it->second);
    }
  } catch (const std::exception& e) {
    setup->load_error = e.what();
  }
  if (setup->templates.empty() && setup->template_errors.empty() && setup->load_error.empty())
    setup->load_error = "the model has no chat template (no chat_template.jinja, chat_template.json "
                        "or chat_template in tokenizer_config.json; set option.chat_template to "
                        "a template file)";
  return setup;
}

LmiRequest parse_request(const ChatSetup& chat, const std::string& body) {
  // Key order matters to a template (tojson of a tool's schema prints it): keep the client's.
  if (json_bounds::nesting_depth(body) > json_bounds::kMaxDepth)
    throw_field_error("body", json_bounds::too_deep_message());
  ordered_json j = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw_field_error("body", "is not valid JSON");
  if (!j.is_object() || !j.contains("messages")) return parse_lmi_request(body);

  chat::ChatOptions options;
  options.add_generation_prompt = true;
  options.special_tokens = chat.special_tokens;
  json lmi = json::object();
  ordered_json tool_choice;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const ordered_json& v = it.value();
    if (key == "messages") continue;
    if (key == "tools" || key == "documents") {
      if (!v.is_null() && !v.is_array()) throw_field_error(key, "must be a list");
      (key == "tools" ? options.tools : options.documents) = v;
    } else if (key == "chat_template_kwargs") {
      if (!v.is_null() && !v.is_object()) throw_field_error(key, "must be a JSON object");
      if (v.is_object()) options.variables = v;
    } else if (key == "tool_choice") {
      tool_choice = v;
    } else if (key == "parameters" || key == "stream") {
      lmi[key] = json::parse(v.dump());
    } else {
      throw_field_error(
          json_bounds::clip(key),
          "unknown request field; allowed with messages: messages, tools, tool_choice, "
          "documents, chat_template_kwargs, parameters, stream");
    }
  }
  const ordered_json messages = checked_messages(j["messages"]);
  if (!chat.load_error.empty()) throw_field_error("messages", chat.load_error);
  // "none": the tools are not shown to the template either (as the server does).
  if (tool_choice == "none") options.tools = nullptr;
  std::shared_ptr<const JsonGrammar> forced =
      tool_choice_grammar(chat.tool_call_parser, options.tools, tool_choice);
  const bool has_tools = options.tools.is_array() && !options.tools.empty();
  std::string name = has_tools && (chat.templates.count("tool_use") ||
                                   chat.template_errors.count("tool_use"))
                         ? "tool_use"
                         : "default";
  auto t = chat.templates.find(name);
  if (t == chat.templates.end()) {
    auto e = chat.template_errors.find(name);
    throw_field_error(
        "messages",
        e != chat.template_errors.end()
            ? fmt::format("the model's chat template does not compile: {}", e->second)
            : fmt::format("the model has no '{}' chat template ({})", name, chat.source));
  }
  std::string prompt;
  try {
    prompt = chat::render_chat(*t->second, messages, options);
  } catch (const chat::TemplateError& e) {
    // raise_exception's text is the template's message to the client, verbatim.
    throw RequestError("messages", e.raised() ? e.what()
                                              : fmt::format("chat template error: {}", e.what()));
  } catch (const Error& e) {
    throw RequestError("messages", fmt::format("chat template error: {}", e.what()));
  }
  if (prompt.empty()) throw_field_error("messages", "the chat template rendered an empty prompt");
  lmi["inputs"] = std::move(prompt);
  LmiRequest r = parse_lmi_request(lmi);
  r.add_special_tokens = false;
  r.params.constraint = std::move(forced);
  // No max_new_tokens: as many as max_tokens leaves (OpenAI's default), not LMI's 30.
  const json* p = lmi.contains("parameters") ? &lmi["parameters"] : nullptr;
  if (p == nullptr || !p->is_object() || !p->contains("max_new_tokens") ||
      (*p)["max_new_tokens"].is_null())
    r.params.max_new_tokens = 0;
  return r;
}

}  // namespace lmx::plugin
