// A compiled Jinja template with the globals jinja2 and transformers give chat templates
// (range, dict, namespace, joiner, raise_exception, strftime_now).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "engine/chat/ast.h"
#include "engine/chat/interpreter.h"
#include "engine/chat/value.h"

namespace lmx::chat {

class Template {
 public:
  // Parses and checks the template; throws lmx::Error with the line and what was expected.
  explicit Template(std::string_view source);

  // Throws TemplateError (raise_exception's message verbatim, or the runtime error).
  std::string render(const Dict& variables, const Limits& limits = {}) const;

 private:
  std::shared_ptr<const TemplateAst> ast_;
};

std::map<std::string, Value> default_globals();

}  // namespace lmx::chat
