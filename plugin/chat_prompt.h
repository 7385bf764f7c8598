// Chat requests in the plugin: {"messages": [...], "tools"?, "documents"?, "chat_template_kwargs"?,
// "parameters"?, "stream"?} is rendered with the model's own chat template (add_generation_prompt
// on) into an LMI request whose input is the rendered prompt, tokenized without adding special
// tokens again (as transformers' apply_chat_template(tokenize=True) does).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/chat/template.h"
#include "plugin/lmi_request.h"

namespace lmx::plugin {

// The model's templates compiled once, its special tokens and the tool-call format.
struct ChatSetup {
  std::map<std::string, std::shared_ptr<const chat::Template>> templates;  // by name
  std::map<std::string, std::string> template_errors;  // by name: a template that did not compile
  std::map<std::string, nlohmann::ordered_json> special_tokens;
  std::string source;            // the file the templates came from ("" when none)
  std::string tool_call_parser;  // hermes | llama3_json | mistral | "" (none)
  std::string load_error;        // why no template could be loaded ("" when fine)
};

// Never throws: a model without a usable template still serves plain prompts; chat requests
// then get a 400 saying why. `override_file`: option.chat_template; `parser`:
// option.tool_call_parser ("" = chosen from the template).
std::shared_ptr<const ChatSetup> load_chat_setup(const std::string& model_dir,
                                                 const std::optional<std::string>& override_file,
                                                 const std::string& parser);

// The tool-call format a template's text implies: <tool_call> -> hermes, [TOOL_CALLS] ->
// mistral, <|python_tag|> or ipython -> llama3_json; "" when none.
std::string tool_call_parser_of(const std::string& template_text);

// A request body (LMI or chat) -> the LMI request. Throws RequestError naming the field; a
// template's raise_exception() message is the error message verbatim.
LmiRequest parse_request(const ChatSetup& chat, const std::string& body);

}  // namespace lmx::plugin
