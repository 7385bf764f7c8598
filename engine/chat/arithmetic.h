// Python's operators as jinja2 applies them: + - * / // % ** ~, comparisons, `in`, slicing, and
// printf-style `str % args`. Misuse (Undefined operands, mixed types) fails like Python does.
#pragma once

#include <optional>
#include <cstdint>
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

// Python's int(f) for a finite double: truncated toward zero; the template fails where the result
// does not fit 64 bits (Python's int is unbounded: there is no value to give).
int64_t truncate_to_int(Interpreter& in, double f);

// A run of ASCII digits ("0", "12") as the integer index it names; past 64 bits the largest
// int64, which no sequence reaches (Python's int would be larger still: the lookup fails alike).
int64_t index_from_digits(const std::string& digits);

}  // namespace lmx::chat::arith
