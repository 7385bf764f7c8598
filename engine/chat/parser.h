// Builds the syntax tree from the lexer's tokens with jinja2's grammar and precedence. Errors
// name the line and what was expected ("chat template: line 3: expected 'endfor', got 'endif'").
#pragma once

#include <string_view>

#include "engine/chat/ast.h"

namespace lmx::chat {

TemplateAst parse_template(std::string_view source);

}  // namespace lmx::chat
