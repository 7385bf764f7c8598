// Python's str.format ("{}", "{0}", "{name}", "{0[key]}", "{:>8.2f}") and format(value, spec),
// for the templates that build tokens with '<tool_call{}>'.format(suffix).
#pragma once

#include <string>

#include "engine/chat/value.h"

namespace lmx::chat {

std::string format_string(Interpreter& in, const std::string& fmt, const CallArgs& args);
std::string format_value(Interpreter& in, const Value& v, const std::string& spec);

}  // namespace lmx::chat
