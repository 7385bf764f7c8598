// Chat messages -> prompt text, as transformers' apply_chat_template(tokenize=False) renders them:
// the template sees messages, tools, documents, add_generation_prompt, the tokenizer's special
// tokens (bos_token, eos_token, ...) and any extra variables (chat_template_kwargs).
#pragma once

#include <ctime>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/chat/interpreter.h"
#include "engine/chat/template.h"

namespace lmx::chat {

struct ChatOptions {
  nlohmann::ordered_json tools;      // null: the template sees tools = None
  nlohmann::ordered_json documents;  // null: documents = None
  bool add_generation_prompt = false;
  // Special tokens (bos_token, eos_token, unk_token, pad_token, ...) by name: absent ones are
  // undefined in the template, as in transformers.
  std::map<std::string, nlohmann::ordered_json> special_tokens;
  // chat_template_kwargs: extra variables; they win over special tokens of the same name.
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  Limits limits;
  // The local time strftime_now() formats; unset: the clock's (transformers: datetime.now()).
  std::optional<std::tm> now;
};

// Throws lmx::Error on a syntax error (with the line) and TemplateError when rendering fails;
// TemplateError::raised() tells the template's own raise_exception() apart.
std::string render_chat(const std::string& template_text, const nlohmann::ordered_json& messages,
                        const ChatOptions& options);
// The same with a template compiled once (a server renders every request with the model's one).
std::string render_chat(const Template& tmpl, const nlohmann::ordered_json& messages,
                        const ChatOptions& options);

// The chat templates of a model directory: tokenizer_config.json's chat_template (a string, or a
// list of {name, template}), overridden by chat_template.jinja (or chat_template.json) beside it.
struct ChatTemplates {
  std::map<std::string, std::string> named;  // "default" holds a single unnamed template
  std::string source;                        // the file it came from

  bool empty() const { return named.empty(); }
  // transformers' choice: `name` if given; else "tool_use" when tools are passed and it exists;
  // else "default". Throws lmx::Error when there is none to choose.
  const std::string& select(const std::optional<std::string>& name, bool has_tools) const;
};

// `override_file` (option.chat_template / --template) wins over everything in the directory.
ChatTemplates load_chat_templates(const std::string& model_dir,
                                  const std::optional<std::string>& override_file = std::nullopt);

// bos_token, eos_token, ... from tokenizer_config.json (strings or {"content": ...} objects),
// plus additional_special_tokens, as transformers' special_tokens_map passes them.
std::map<std::string, nlohmann::ordered_json> load_special_tokens(const std::string& model_dir);

}  // namespace lmx::chat
