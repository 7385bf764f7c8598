#include "engine/chat/arithmetic.h"

#include <cmath>
#include <cstdio>

namespace lmx::chat::arith {
namespace {

[[noreturn]] void unsupported(Interpreter& in, const std::string& op, const Value& a,
                              const Value& b) {
  in.fail(fmt::format("TypeError: unsupported operand type(s) for {}: '{}' and '{}'", op,
                      a.type_name(), b.type_name()));
}

void check_defined(Interpreter& in, const Value& v) {
  if (v.is_undefined()) in.fail(v.undef().hint);
}

// a op b on 64-bit integers; Python's would grow past 64 bits, LMX refuses instead.
int64_t checked(Interpreter& in, char op, int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflow = op == '+'   ? __builtin_add_overflow(a, b, &r)
                        : op == '-' ? __builtin_sub_overflow(a, b, &r)
                                    : __builtin_mul_overflow(a, b, &r);
  if (overflow) in.fail("integer overflow (beyond 64 bits)");
  return r;
}

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    if (n > 0) {
      in.check_size(seq.str().size() * static_cast<size_t>(n));
      in.charge(seq.str().size() * static_cast<size_t>(n) / 256);
      for (int64_t i = 0; i < n; ++i) out += seq.str();
    }
    return seq.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  List out;
  if (n > 0) {
    in.check_size(seq.items().size() * static_cast<size_t>(n));
    in.charge(seq.items().size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  }
  return Value::list(std::move(out), seq.is_tuple());
}

double floor_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value unary(Interpreter& in, const std::string& op, const Value& v) {
  check_defined(in, v);
  if (!v.is_number()) in.fail(fmt::format("TypeError: bad operand type for unary {}: '{}'", op, v.type_name()));
  if (op == "+") return v.is_float() ? v : Value(v.to_int());
  if (v.is_float()) return Value(-v.to_double());
  return Value(-v.to_int());
}

Value binary(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    in.check_size(s.size());
    in.charge(s.size() / 256);
    return Value(std::move(s));
  }
  check_defined(in, a);
  check_defined(in, b);
  const bool nums = a.is_number() && b.is_number();
  const bool floats = nums && (a.is_float() || b.is_float());
  if (op == "+") {
    if (nums) {
      if (floats) return Value(a.to_double() + b.to_double());
      return Value(checked(in, '+', a.to_int(), b.to_int()));
    }
    if (a.is_string() && b.is_string()) {
      in.check_size(a.str().size() + b.str().size());
      in.charge((a.str().size() + b.str().size()) / 256);
      // Markup + str escapes the str (markupsafe), whichever side the Markup is on.
      if (a.is_markup() != b.is_markup())
        return Value::markup((a.is_markup() ? a.str() : html_escape(a.str())) +
                             (b.is_markup() ? b.str() : html_escape(b.str())));
      return a.is_markup() ? Value::markup(a.str() + b.str()) : Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && !a.is_iterator() && !b.is_iterator() &&
        a.is_tuple() == b.is_tuple()) {
      in.charge(a.items().size() + b.items().size());
      List out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.is_tuple());
    }
    if (a.is_string())
      in.fail(fmt::format("TypeError: can only concatenate {} (not \"{}\") to {}", a.type_name(),
                          b.type_name(), a.type_name()));
    unsupported(in, op, a, b);
  }
  if (op == "-") {
    if (!nums) unsupported(in, op, a, b);
    if (floats) return Value(a.to_double() - b.to_double());
    return Value(checked(in, '-', a.to_int(), b.to_int()));
  }
  if (op == "*") {
    if (nums) {
      if (floats) return Value(a.to_double() * b.to_double());
      return Value(checked(in, '*', a.to_int(), b.to_int()));
    }
    auto seq = [](const Value& v) { return v.is_string() || (v.is_list() && !v.is_iterator()); };
    if (seq(a) && (b.is_int() || b.is_bool())) return repeat(in, a, b.to_int());
    if (seq(b) && (a.is_int() || a.is_bool())) return repeat(in, b, a.to_int());
    unsupported(in, op, a, b);
  }
  if (op == "/") {
    if (!nums) unsupported(in, op, a, b);
    if (b.to_double() == 0) in.fail("ZeroDivisionError: division by zero");
    return Value(a.to_double() / b.to_double());
  }
  if (op == "//") {
    if (!nums) unsupported(in, op, a, b);
    if (b.to_double() == 0) in.fail("ZeroDivisionError: integer division or modulo by zero");
    if (floats) return Value(std::floor(a.to_double() / b.to_double()));
    const int64_t x = a.to_int(), y = b.to_int();
    int64_t q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return Value(q);
  }
  if (op == "%") {
    if (a.is_string()) return Value(percent_format(in, a.str(), b));
    if (!nums) unsupported(in, op, a, b);
    if (b.to_double() == 0) in.fail("ZeroDivisionError: integer division or modulo by zero");
    if (floats) return Value(floor_mod(a.to_double(), b.to_double()));
    const int64_t x = a.to_int(), y = b.to_int();
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value(r);
  }
  if (op == "**") {
    if (!nums) unsupported(in, op, a, b);
    if (floats || b.to_int() < 0) return Value(std::pow(a.to_double(), b.to_double()));
    int64_t r = 1, base = a.to_int();
    for (int64_t e = b.to_int(); e > 0; --e) {
      if (__builtin_mul_overflow(r, base, &r)) in.fail("integer overflow (beyond 64 bits)");
      if (r == 0 || r == 1) break;
    }
    return Value(r);
  }
  in.fail("unknown operator " + op);
}

bool compare(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string())
        in.fail(fmt::format("TypeError: 'in <string>' requires string as left operand, not {}",
                            a.type_name()));
      found = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& x : b.items()) found = found || equals(a, x);
    } else if (b.is_dict()) {
      found = b.dict_ref().find(a) != nullptr;
    } else if (b.is_undefined()) {
      found = false;
    } else {
      in.fail(fmt::format("TypeError: argument of type '{}' is not iterable", b.type_name()));
    }
    return op == "in" ? found : !found;
  }
  check_defined(in, a);
  check_defined(in, b);
  try {
    if (op == "<") return less_than(a, b);
    if (op == ">") return less_than(b, a);
    if (op == "<=") return less_than(a, b) || equals(a, b);
    if (op == ">=") return less_than(b, a) || equals(a, b);
  } catch (const TemplateError&) {
    throw;
  } catch (const Error&) {
    in.fail(fmt::format("TypeError: '{}' not supported between instances of '{}' and '{}'", op,
                        a.type_name(), b.type_name()));
  }
  in.fail("unknown comparison " + op);
}

Value slice(Interpreter& in, const Value& obj, std::optional<int64_t> start,
            std::optional<int64_t> stop, std::optional<int64_t> step) {
  const int64_t st = step.value_or(1);
  if (st == 0) in.fail("ValueError: slice step cannot be zero");
  std::u32string text;
  int64_t n = 0;
  if (obj.is_string()) {
    text = py::decode(obj.str());
    n = static_cast<int64_t>(text.size());
  } else if (obj.is_list() && !obj.is_iterator()) {
    n = static_cast<int64_t>(obj.items().size());
  } else {
    return Value::undefined(fmt::format("'{} object' has no element slice", obj.type_name()));
  }
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  const int64_t b = adjust(start, st < 0 ? n - 1 : 0);
  const int64_t e = adjust(stop, st < 0 ? -1 : n);
  std::u32string out_text;
  List out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (obj.is_string())
      out_text += text[static_cast<size_t>(i)];
    else
      out.push_back(obj.items()[static_cast<size_t>(i)]);
  }
  if (obj.is_string()) return Value(py::encode(out_text));
  return Value::list(std::move(out), obj.is_tuple());
}

std::string percent_format(Interpreter& in, const std::string& fmt, const Value& args) {
  List values = args.is_tuple() ? args.items() : List{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    size_t j = i + 1;
    std::string spec = "%";
    while (j < fmt.size() && std::string_view("-+ #0123456789.").find(fmt[j]) != std::string_view::npos)
      spec += fmt[j++];
    if (j >= fmt.size()) in.fail("ValueError: incomplete format");
    const char conv = fmt[j];
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) in.fail("TypeError: not enough arguments for format string");
    const Value& v = values[next++];
    char buf[512];
    if (conv == 's' || conv == 'r') {
      const std::string s = conv == 's' ? to_str(v) : repr(v);
      if (spec == "%") {
        out += s;
      } else {
        std::snprintf(buf, sizeof buf, (spec + "s").c_str(), s.c_str());
        out += buf;
      }
    } else if (conv == 'd' || conv == 'i') {
      if (!v.is_number()) in.fail("TypeError: %d format: a real number is required");
      if (v.is_float() && !std::isfinite(v.to_double()))
        in.fail(fmt::format("OverflowError: cannot convert float {} to integer", float_repr(v.to_double())));
      std::snprintf(buf, sizeof buf, (spec + "lld").c_str(),
                    static_cast<long long>(v.is_float() ? truncate_to_int(in, v.to_double()) : v.to_int()));
      out += buf;
    } else if (conv == 'f' || conv == 'e' || conv == 'g' || conv == 'F' || conv == 'E' || conv == 'G') {
      if (!v.is_number()) in.fail("TypeError: must be real number");
      std::snprintf(buf, sizeof buf, (spec + conv).c_str(), v.to_double());
      out += buf;
    } else if (conv == 'x' || conv == 'X' || conv == 'o') {
      if (!v.is_int() && !v.is_bool())
        in.fail(fmt::format("TypeError: %{} format: an integer is required, not {}", conv, v.type_name()));
      std::snprintf(buf, sizeof buf, (spec + "ll" + conv).c_str(), static_cast<long long>(v.to_int()));
      out += buf;
    } else {
      in.fail(fmt::format("ValueError: unsupported format character '{}'", conv));
    }
  }
  if (next < values.size() && args.is_tuple())
    in.fail("TypeError: not all arguments converted during string formatting");
  return out;
}

int64_t truncate_to_int(Interpreter& in, double f) {
  if (!(std::fabs(f) < 9223372036854775808.0))
    in.fail(fmt::format("int: {} does not fit in 64 bits", float_repr(f)));
  return static_cast<int64_t>(f);
}

int64_t index_from_digits(const std::string& digits) {
  int64_t n = 0;
  for (char c : digits) {
    if (n > (INT64_MAX - (c - '0')) / 10) return INT64_MAX;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace lmx::chat::arith
