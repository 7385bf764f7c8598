#include "engine/chat/format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine/chat/arithmetic.h"
#include "engine/chat/interpreter.h"
#include "engine/chat/pystring.h"

namespace lmx::chat {

std::string format_value(Interpreter& in, const Value& v, const std::string& spec) {
  if (spec.empty()) return to_str(v);
  // [[fill]align][sign][#][0][width][,][.precision][type]
  size_t i = 0;
  const std::u32string s = py::decode(spec);
  char32_t fill = U' ';
  char align = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    fill = s[0];
    align = static_cast<char>(s[1]);
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    align = static_cast<char>(s[0]);
    i = 1;
  }
  char sign = '-';
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) sign = static_cast<char>(s[i++]);
  if (i < s.size() && s[i] == '#') ++i;
  if (i < s.size() && s[i] == '0') {
    if (!align) {
      fill = U'0';
      align = '=';
    }
    ++i;
  }
  int64_t width = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') width = width * 10 + (s[i++] - '0');
  char grouping = 0;
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) grouping = static_cast<char>(s[i++]);
  int precision = -1;
  if (i < s.size() && s[i] == '.') {
    precision = 0;
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') precision = precision * 10 + (s[i++] - '0');
  }
  char type = 0;
  if (i < s.size()) type = static_cast<char>(s[i++]);
  if (i != s.size()) in.fail("ValueError: Invalid format specifier");
  in.check_size(static_cast<size_t>(width));

  std::string body;
  bool numeric = false;
  if (v.is_string() || (!v.is_number())) {
    if (type && type != 's') in.fail(fmt::format("ValueError: Unknown format code '{}' for object of type '{}'", type, v.type_name()));
    if (!v.is_string() && !v.is_undefined())
      in.fail(fmt::format("TypeError: unsupported format string passed to {}.__format__", v.type_name()));
    body = v.is_string() ? v.str() : "";
    if (precision >= 0) body = py::encode(py::decode(body).substr(0, static_cast<size_t>(precision)));
  } else {
    numeric = true;
    char buf[512];
    const bool as_float = v.is_float() || (type && std::string("eEfFgG%").find(type) != std::string::npos);
    if (!as_float && type != 'x' && type != 'X' && type != 'o' && type != 'b' && type != 'c') {
      if (v.is_bool() && !type) {
        body = v.as_bool() ? "True" : "False";
        numeric = false;
      } else {
        body = std::to_string(v.to_int());
      }
    } else if (!as_float) {
      const long long n = v.to_int();
      if (type == 'c') {
        body = py::encode(std::u32string(1, static_cast<char32_t>(n)));
      } else if (type == 'b') {
        unsigned long long u = static_cast<unsigned long long>(std::llabs(n));
        do {
          body.insert(body.begin(), static_cast<char>('0' + (u & 1)));
          u >>= 1;
        } while (u);
        if (n < 0) body = "-" + body;
      } else {
        std::snprintf(buf, sizeof buf, type == 'o' ? "%llo" : type == 'x' ? "%llx" : "%llX",
                      static_cast<unsigned long long>(std::llabs(n)));
        body = (n < 0 ? "-" : "") + std::string(buf);
      }
    } else {
      double d = v.to_double();
      if (!type) {
        if (precision < 0) {
          body = float_repr(d);
        } else {
          std::snprintf(buf, sizeof buf, "%.*g", precision == 0 ? 1 : precision, d);
          body = buf;
        }
      } else {
        const char t = type == '%' ? 'f' : type;
        if (type == '%') d *= 100;
        std::snprintf(buf, sizeof buf, (std::string("%.*") + t).c_str(), precision < 0 ? 6 : precision, d);
        body = buf;
        if (type == '%') body += "%";
      }
    }
    if (numeric && grouping) {  // 1234567 -> 1,234,567 (integer part only)
      const size_t b = body[0] == '-' ? 1 : 0;
      size_t e = body.find_first_not_of("0123456789", b);
      if (e == std::string::npos) e = body.size();
      for (size_t k = e; k > b + 3; k -= 3) body.insert(k - 3, 1, grouping);
    }
    if (numeric && sign != '-' && !body.empty() && body[0] != '-') body = std::string(1, sign) + body;
  }
  if (!align) align = numeric ? '>' : '<';
  const long long len = py::length(body);
  if (width <= len) return body;
  std::string f = py::encode(std::u32string(1, fill));
  if (align == '=') {
    std::string sgn;
    if (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) {
      sgn = body.substr(0, 1);
      body = body.substr(1);
    }
    std::string pad;
    for (long long k = 0; k < width - len; ++k) pad += f;
    return sgn + pad + body;
  }
  return py::pad(body, width, fill, align);
}

std::string format_string(Interpreter& in, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      in.fail("ValueError: Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t end = fmt.find('}', i);
    if (end == std::string::npos) in.fail("ValueError: Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, end - i - 1);
    i = end;
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field.resize(bang);
    }
    // The first name part, then .attr and [key] accessors.
    size_t p = 0;
    while (p < field.size() && field[p] != '.' && field[p] != '[') ++p;
    const std::string head = field.substr(0, p);
    Value v;
    if (head.empty() || std::isdigit(static_cast<unsigned char>(head[0]))) {
      const size_t idx = head.empty() ? auto_index++ : std::stoul(head);
      if (idx >= args.positional.size())
        in.fail(fmt::format("IndexError: Replacement index {} out of range for positional args tuple", idx));
      v = args.positional[idx];
    } else {
      bool found = false;
      for (const auto& [k, val] : args.keyword) {
        if (k == head) {
          v = val;
          found = true;
        }
      }
      if (!found) in.fail(fmt::format("KeyError: '{}'", head));
    }
    while (p < field.size()) {
      if (field[p] == '.') {
        size_t q = p + 1;
        while (q < field.size() && field[q] != '.' && field[q] != '[') ++q;
        v = in.getattr(v, field.substr(p + 1, q - p - 1));
        p = q;
      } else {
        const size_t q = field.find(']', p);
        if (q == std::string::npos) in.fail("ValueError: Missing ']' in format string");
        const std::string key = field.substr(p + 1, q - p - 1);
        const bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = in.getitem(v, digits ? Value(arith::index_from_digits(key)) : Value(key));
        p = q + 1;
      }
    }
    if (conv == "r" || conv == "a") v = Value(repr(v));
    else if (conv == "s") v = Value(to_str(v));
    out += format_value(in, v, spec);
    in.check_size(out.size());
  }
  return out;
}

}  // namespace lmx::chat
