// A compiled Jinja template with the globals jinja2 and transformers give chat templates
// (range, dict, namespace, joiner, raise_exception, strftime_now).
#pragma once

#include <ctime>
#include <map>
#include <memory>
#include <optional>
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

  // Throws TemplateError (raise_exception's message verbatim, or the runtime error). `now`: the
  // local time strftime_now() formats (default: the clock's), to render reproducibly.
  std::string render(const Dict& variables, const Limits& limits = {},
                     const std::optional<std::tm>& now = std::nullopt) const;

 private:
  std::shared_ptr<const TemplateAst> ast_;
};

std::map<std::string, Value> default_globals(const std::optional<std::tm>& now = std::nullopt);

}  // namespace lmx::chat
