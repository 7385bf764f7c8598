// Methods of str, dict and list that templates call (message.content.strip(), tool.items(), ...),
// with the ImmutableSandboxedEnvironment's refusals (jinja2 3.1.6): methods that modify a dict or
// list in place (update, pop, append, clear, ...) are unsafe Undefineds. jinja2 3.1.2 (Debian 12)
// still allowed list.pop and list.clear; LMX follows the newer, stricter list.
#include <algorithm>
#include <set>

#include "engine/chat/arithmetic.h"
#include "engine/chat/format.h"
#include "engine/chat/interpreter.h"
#include "engine/chat/objects.h"
#include "engine/chat/pystring.h"

namespace lmx::chat {
namespace {

const Value* arg(const CallArgs& a, const char* name, size_t index) { return a.get(name, index); }

std::string str_arg(Interpreter& in, const CallArgs& a, const char* name, size_t index) {
  const Value* v = arg(a, name, index);
  if (!v) in.fail(fmt::format("missing argument '{}'", name));
  if (!v->is_string())
    in.fail(fmt::format("TypeError: must be str, not {}", v->type_name()));
  return v->str();
}

std::optional<std::string> opt_str(Interpreter& in, const CallArgs& a, const char* name,
                                   size_t index) {
  const Value* v = arg(a, name, index);
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) in.fail(fmt::format("TypeError: must be str or None, not {}", v->type_name()));
  return v->str();
}

int64_t int_arg(Interpreter& in, const CallArgs& a, const char* name, size_t index, int64_t dflt) {
  const Value* v = arg(a, name, index);
  if (!v) return dflt;
  if (!v->is_int() && !v->is_bool())
    in.fail(fmt::format("TypeError: '{}' object cannot be interpreted as an integer", v->type_name()));
  return v->to_int();
}

Value str_list(const std::vector<std::string>& parts) {
  List out;
  for (const std::string& p : parts) out.emplace_back(p);
  return Value::list(std::move(out));
}

// startswith/endswith take a str or a tuple of str.
bool affix(Interpreter& in, const std::string& s, const Value& what, bool prefix) {
  auto one = [&](const Value& v) {
    if (!v.is_string())
      in.fail(fmt::format("TypeError: {} first arg must be str or a tuple of str, not {}",
                          prefix ? "startswith" : "endswith", v.type_name()));
    const std::string& p = v.str();
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (what.is_tuple()) {
    for (const Value& v : what.items())
      if (one(v)) return true;
    return false;
  }
  return one(what);
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  const std::u32string t = py::decode(s);
  if (t.empty()) return false;
  return std::all_of(t.begin(), t.end(), pred);
}

Value string_method(Interpreter& in, const std::string& s, const std::string& m, const CallArgs& a) {
  if (m == "strip" || m == "lstrip" || m == "rstrip")
    return Value(py::strip(s, opt_str(in, a, "chars", 0), m != "rstrip", m != "lstrip"));
  if (m == "split" || m == "rsplit")
    return str_list(py::split(s, opt_str(in, a, "sep", 0), int_arg(in, a, "maxsplit", 1, -1), m == "rsplit"));
  if (m == "splitlines") {
    const Value* k = arg(a, "keepends", 0);
    return str_list(py::splitlines(s, k && k->truthy()));
  }
  if (m == "startswith" || m == "endswith") {
    const Value* w = arg(a, m == "startswith" ? "prefix" : "suffix", 0);
    if (!w) in.fail(m + "() takes at least 1 argument (0 given)");
    return Value(affix(in, s, *w, m == "startswith"));
  }
  if (m == "upper") return Value(py::upper(s));
  if (m == "lower" || m == "casefold") return Value(py::lower(s));
  if (m == "title") return Value(py::title(s));
  if (m == "capitalize") return Value(py::capitalize(s));
  if (m == "swapcase") return Value(py::swapcase(s));
  if (m == "replace") {
    std::string r = py::replace(s, str_arg(in, a, "old", 0), str_arg(in, a, "new", 1),
                                int_arg(in, a, "count", 2, -1));
    in.check_size(r.size());
    return Value(std::move(r));
  }
  if (m == "format") return Value(format_string(in, s, a));
  if (m == "join") {
    const Value* v = arg(a, "iterable", 0);
    if (!v) in.fail("join() takes exactly one argument (0 given)");
    std::string out;
    bool first = true;
    for (const Value& x : iterate(*v)) {
      if (!x.is_string())
        in.fail(fmt::format("TypeError: sequence item: expected str instance, {} found", x.type_name()));
      if (!first) out += s;
      first = false;
      out += x.str();
    }
    return Value(std::move(out));
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex") {
    const long long at = py::find(s, str_arg(in, a, "sub", 0), m[0] == 'r');
    if (at < 0 && (m == "index" || m == "rindex")) in.fail("ValueError: substring not found");
    return Value(static_cast<int64_t>(at));
  }
  if (m == "count") return Value(static_cast<int64_t>(py::count(s, str_arg(in, a, "sub", 0))));
  if (m == "isdigit" || m == "isdecimal" || m == "isnumeric")
    return Value(all_chars(s, [](char32_t c) { return c >= '0' && c <= '9'; }));
  if (m == "isalpha")
    return Value(all_chars(s, [](char32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }));
  if (m == "isalnum")
    return Value(all_chars(s, [](char32_t c) {
      return ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9');
    }));
  if (m == "isspace") return Value(all_chars(s, py::is_space));
  if (m == "isupper") return Value(py::is_upper(s));
  if (m == "islower") return Value(py::is_lower(s));
  if (m == "center" || m == "ljust" || m == "rjust") {
    const int64_t width = int_arg(in, a, "width", 0, 0);
    in.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
    const std::optional<std::string> fill = opt_str(in, a, "fillchar", 1);
    const char32_t f = fill && !fill->empty() ? py::decode(*fill)[0] : U' ';
    return Value(py::pad(s, width, f, m == "center" ? '^' : m == "ljust" ? '<' : '>'));
  }
  if (m == "zfill") {
    const int64_t width = int_arg(in, a, "width", 0, 0);
    const long long len = py::length(s);
    if (width <= len) return Value(s);
    const bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
    return Value((sign ? s.substr(0, 1) : "") + std::string(static_cast<size_t>(width - len), '0') +
                 s.substr(sign ? 1 : 0));
  }
  if (m == "partition" || m == "rpartition") {
    const std::string sep = str_arg(in, a, "sep", 0);
    const size_t at = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return m == "partition" ? Value::list({Value(s), Value(""), Value("")}, true)
                              : Value::list({Value(""), Value(""), Value(s)}, true);
    return Value::list({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))}, true);
  }
  if (m == "removeprefix" || m == "removesuffix") {
    const std::string x = str_arg(in, a, m == "removeprefix" ? "prefix" : "suffix", 0);
    if (m == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value(s.substr(x.size()));
    if (m == "removesuffix" && x.size() <= s.size() && !x.empty() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value(s.substr(0, s.size() - x.size()));
    return Value(s);
  }
  in.fail(fmt::format("str method '{}' is not supported", m));
}

Value dict_method(Interpreter& in, const Value& self, const std::string& m, const CallArgs& a) {
  const Dict& d = self.dict_ref();
  if (m == "items") {
    List out;
    for (const auto& [k, v] : d.items) out.push_back(Value::list({k, v}, true));
    return Value::list(std::move(out));
  }
  if (m == "keys" || m == "values") {
    List out;
    for (const auto& [k, v] : d.items) out.push_back(m == "keys" ? k : v);
    return Value::list(std::move(out));
  }
  if (m == "get") {
    const Value* key = arg(a, "key", 0);
    if (!key) in.fail("get expected at least 1 argument, got 0");
    if (const Value* v = d.find(*key)) return *v;
    const Value* dflt = arg(a, "default", 1);
    return dflt ? *dflt : Value(None{});
  }
  if (m == "copy") return Value::dict(d);
  in.fail(fmt::format("dict method '{}' is not supported", m));
}

Value list_method(Interpreter& in, const Value& self, const std::string& m, const CallArgs& a) {
  const List& l = self.items();
  if (m == "index" || m == "count") {
    const Value* x = arg(a, "value", 0);
    if (!x) in.fail(m + "() takes at least 1 argument (0 given)");
    int64_t n = 0;
    for (size_t i = 0; i < l.size(); ++i) {
      if (!equals(l[i], *x)) continue;
      if (m == "index") return Value(static_cast<int64_t>(i));
      ++n;
    }
    if (m == "index") in.fail(fmt::format("ValueError: {} is not in list", repr(*x)));
    return Value(n);
  }
  if (m == "copy") return Value::list(l, false);
  in.fail(fmt::format("list method '{}' is not supported", m));
}

// markupsafe.Markup's methods: string arguments are escaped and str results stay Markup.
Value markup_method(Interpreter& in, const Value& self, const std::string& m, const CallArgs& a) {
  auto esc = [](const Value& v) {
    return v.is_string() && !v.is_markup() ? Value::markup(arith::html_escape(v.str())) : v;
  };
  CallArgs args;
  for (const Value& v : a.positional) args.positional.push_back(esc(v));
  for (const auto& [k, v] : a.keyword) args.keyword.emplace_back(k, esc(v));
  if (m == "join" && !args.positional.empty()) {
    List items;
    for (const Value& v : iterate(args.positional[0])) items.push_back(esc(v));
    args.positional[0] = Value::list(std::move(items));
  }
  const Value r = string_method(in, self.str(), m, args);
  if (r.is_string()) return Value::markup(r.str());
  if (r.is_list() && !r.items().empty() && r.items()[0].is_string()) {
    List items;
    for (const Value& v : r.items()) items.push_back(v.is_string() ? Value::markup(v.str()) : v);
    return Value::list(std::move(items), r.is_tuple());
  }
  return r;
}

const std::set<std::string>& string_methods() {
  static const std::set<std::string> names = {
      "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith",
      "upper", "lower", "casefold", "title", "capitalize", "swapcase", "replace", "format",
      "join", "find", "rfind", "index", "rindex", "count", "isdigit", "isdecimal", "isnumeric",
      "isalpha", "isalnum", "isspace", "isupper", "islower", "center", "ljust", "rjust", "zfill",
      "partition", "rpartition", "removeprefix", "removesuffix"};
  return names;
}

}  // namespace

std::optional<Value> method(const Value& self, const std::string& name) {
  auto bind = [&](auto fn) {
    return make_function(name, [self, name, fn](Interpreter& in, const CallArgs& a) {
      return fn(in, self, name, a);
    });
  };
  auto unsafe = [&]() {
    return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name,
                                        self.type_name()),
                            true);
  };
  if (self.is_string()) {
    if (!string_methods().count(name)) return std::nullopt;
    return bind([](Interpreter& in, const Value& s, const std::string& m, const CallArgs& a) {
      return s.is_markup() ? markup_method(in, s, m, a) : string_method(in, s.str(), m, a);
    });
  }
  if (self.is_dict()) {
    if (name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" ||
        name == "update")
      return unsafe();
    if (name != "items" && name != "keys" && name != "values" && name != "get" && name != "copy")
      return std::nullopt;
    return bind(dict_method);
  }
  if (self.is_list()) {
    if (!self.is_tuple() && (name == "append" || name == "clear" || name == "pop" ||
                             name == "reverse" || name == "insert" || name == "sort" ||
                             name == "extend" || name == "remove"))
      return unsafe();
    if (name != "index" && name != "count" && (self.is_tuple() || name != "copy"))
      return std::nullopt;
    return bind(list_method);
  }
  return std::nullopt;
}

}  // namespace lmx::chat
