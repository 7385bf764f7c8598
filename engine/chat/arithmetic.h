// Python's operators as jinja2 applies them: + - * / // % ** ~, comparisons, `in`, slicing, and
// printf-style `str % args`. Misuse (Undefined operands, mixed types) fails like Python does.
#pragma once

#include <optional>
#include <string>

#include "engine/chat/interpreter.h"
#include "engine/chat/pystring.h"
#include "engine/chat/value.h"

namespace lmx::chat::arith {

Value unary(Interpreter& in, const std::string& op, const Value& v);
Value binary(Interpreter& in, const std::string& op, const Value& a, const Value& b);
// ==, !=, <, <=, >, >=, in, "not in"
bool compare(Interpreter& in, const std::string& op, const Value& a, const Value& b);
Value slice(Interpreter& in, const Value& obj, std::optional<int64_t> start,
            std::optional<int64_t> stop, std::optional<int64_t> step);
// markupsafe's escape: & < > " ' as entities.
std::string html_escape(const std::string& s);
// "%s and %d" % args
std::string percent_format(Interpreter& in, const std::string& fmt, const Value& args);

}  // namespace lmx::chat::arith
