// jinja2's built-in filters as chat templates use them, with transformers' tojson. Each follows
// jinja2 3.1's definition (argument names, defaults, what it does with Undefined and None).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>

#include <unicode/uchar.h>

#include "engine/chat/arithmetic.h"
#include "engine/chat/interpreter.h"
#include "engine/chat/json.h"
#include "engine/chat/pystring.h"

namespace lmx::chat {
namespace {

using FilterFn = std::function<Value(Interpreter&, const Value&, const CallArgs&)>;

const Value* arg(const CallArgs& a, const char* name, size_t index) { return a.get(name, index); }

bool flag(const CallArgs& a, const char* name, size_t index, bool dflt = false) {
  const Value* v = arg(a, name, index);
  return v ? v->truthy() : dflt;
}

int64_t int_arg(Interpreter& in, const CallArgs& a, const char* name, size_t index, int64_t dflt) {
  const Value* v = arg(a, name, index);
  if (!v) return dflt;
  if (!v->is_int() && !v->is_bool()) in.fail(fmt::format("argument '{}' must be an integer", name));
  return v->to_int();
}

// jinja2's soft_str: str(value); Undefined is "".
std::string s_(const Value& v) { return to_str(v); }

// make_attrgetter: "a.b.0" looks up each part with getitem (digits as integers).
Value attr_path(Interpreter& in, const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return in.getitem(item, attribute);
  Value v = item;
  const std::string& path = attribute.str();
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = in.getitem(v, digits ? Value(arith::index_from_digits(part)) : Value(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

// Sort key for sort / dictsort / unique / min / max: strings lowered unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py::lower(v.str()));
  return v;
}

List sorted(Interpreter& in, List items, bool reverse, const std::function<Value(const Value&)>& key) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) keyed.emplace_back(key(v), std::move(v));
  try {
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
      return reverse ? less_than(y.first, x.first) : less_than(x.first, y.first);
    });
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& e) {
    in.fail(e.what());
  }
  List out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

// select / reject / selectattr / rejectattr
Value select(Interpreter& in, const Value& seq, const CallArgs& a, bool by_attr, bool keep) {
  size_t next = 0;
  Value attribute;
  if (by_attr) {
    if (a.positional.empty()) in.fail("Missing parameter for attribute name");
    attribute = a.positional[next++];
  }
  std::string test;
  CallArgs targs;
  if (next < a.positional.size()) {
    if (!a.positional[next].is_string()) in.fail("test name must be a string");
    test = a.positional[next++].str();
    targs.positional.assign(a.positional.begin() + static_cast<long>(next), a.positional.end());
    targs.keyword = a.keyword;
  }
  List out;
  if (!seq.truthy()) return Value::iterator({});  // jinja2: `if value:` before iterating
  for (const Value& item : iterate(seq)) {
    const Value v = by_attr ? attr_path(in, item, attribute) : item;
    const bool ok = test.empty() ? v.truthy() : in.test(test, v, targs);
    if (ok == keep) out.push_back(item);
  }
  return Value::iterator(std::move(out));
}

Value do_map(Interpreter& in, const Value& seq, const CallArgs& a) {
  List out;
  if (!seq.truthy()) return Value::iterator({});
  if (const Value* attribute = arg(a, "attribute", 99)) {
    const Value* dflt = arg(a, "default", 99);
    for (const Value& item : iterate(seq)) {
      Value v = attr_path(in, item, *attribute);
      if (v.is_undefined() && dflt) v = *dflt;
      out.push_back(v);
    }
    return Value::iterator(std::move(out));
  }
  if (a.positional.empty()) return Value::iterator(iterate(seq));
  if (!a.positional[0].is_string()) in.fail("map: filter name must be a string");
  const std::string name = a.positional[0].str();
  CallArgs fargs;
  fargs.positional.assign(a.positional.begin() + 1, a.positional.end());
  fargs.keyword = a.keyword;
  for (const Value& item : iterate(seq)) out.push_back(in.filter(name, item, fargs));
  return Value::iterator(std::move(out));
}

std::string title_filter(const std::string& s) {
  // jinja2: split before runs of [-\s({[<]+, then upper the first char and lower the rest of each.
  const std::u32string t = py::decode(s);
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::is_space(c);
  };
  std::string out;
  size_t i = 0;
  while (i < t.size()) {
    size_t j = i;
    const bool sep = is_sep(t[i]);
    while (j < t.size() && is_sep(t[j]) == sep) ++j;
    const std::u32string item = t.substr(i, j - i);
    out += py::upper(py::encode(item.substr(0, 1))) + py::lower(py::encode(item.substr(1)));
    i = j;
  }
  return out;
}

std::string indent_filter(Interpreter& in, const Value& sv, const CallArgs& a) {
  if (!sv.is_string()) in.fail(fmt::format("TypeError: unsupported operand type(s) for +=: '{}' and 'str'", sv.type_name()));
  const Value* w = arg(a, "width", 0);
  std::string ind;
  if (w && w->is_string()) {
    ind = w->str();
  } else {
    const int64_t n = int_arg(in, a, "width", 0, 4);  // jinja2: " " * width
    ind = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 1 << 20)), ' ');
  }
  const bool first = flag(a, "first", 1), blank = flag(a, "blank", 2);
  const std::vector<std::string> lines = py::splitlines(sv.str() + "\n", false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) {
        rv += '\n';
        rv += ind;
      }
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += '\n';
      if (!lines[i].empty()) rv += ind;
      rv += lines[i];
    }
  }
  if (first) rv = ind + rv;
  return rv;
}

Value round_filter(Interpreter& in, const Value& v, const CallArgs& a) {
  const int64_t precision = int_arg(in, a, "precision", 0, 0);
  const Value* m = arg(a, "method", 1);
  const std::string method = m ? s_(*m) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    in.fail("method must be 'common', 'ceil' or 'floor'");
  if (!v.is_number()) in.fail(fmt::format("TypeError: type {} doesn't define __round__ method", v.type_name()));
  const double x = v.to_double();
  if (method == "common") {
    if (!v.is_float()) {  // round(int, n) stays an int; n < 0 rounds to tens, half to even
      const int64_t n = v.to_int();
      if (precision >= 0) return Value(n);
      int64_t p = 1;
      for (int64_t i = 0; i < -precision && p < INT64_MAX / 10; ++i) p *= 10;
      int64_t q = n / p, r = n % p;
      if (r < 0) {
        r += p;
        --q;
      }
      if (2 * r > p || (2 * r == p && (q % 2 != 0))) ++q;
      return Value(q * p);
    }
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::clamp<int64_t>(precision, 0, 300)), x);
    return Value(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  return Value((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
}

using arith::truncate_to_int;

// Python's int(digits, base) for an int (or bool) base of 0 or 2..36; nullopt where Python raises
// TypeError or ValueError (another base type or value, not a number in that base). Base 0 takes
// 0x / 0o / 0b prefixes and refuses other leading zeros, as Python does.
std::optional<int64_t> int_in_base(Interpreter& in, std::string digits, const Value* b) {
  if (b && !b->is_int() && !b->is_bool()) return std::nullopt;
  int base = b ? static_cast<int>(std::clamp<int64_t>(b->to_int(), -1, 37)) : 10;
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
  const size_t body = !digits.empty() && (digits[0] == '-' || digits[0] == '+') ? 1 : 0;
  const auto prefix = [&](char lower) {
    return digits.size() > body + 2 && digits[body] == '0' &&
           std::tolower(static_cast<unsigned char>(digits[body + 1])) == lower;
  };
  const int prefixed = prefix('x') ? 16 : prefix('o') ? 8 : prefix('b') ? 2 : 0;
  if (prefixed && (base == 0 || base == prefixed)) {
    digits.erase(body, 2);
    base = prefixed;
  } else if (base == 0) {
    if (digits.size() > body + 1 && digits[body] == '0' &&
        digits.find_first_not_of('0', body) != std::string::npos)
      return std::nullopt;  // "010": Python refuses it in base 0
    base = 10;
  }
  if (digits.size() <= body || !std::isalnum(static_cast<unsigned char>(digits[body])))
    return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0') return std::nullopt;
  if (errno == ERANGE)
    in.fail(fmt::format("int: {} does not fit in 64 bits", digits));
  return static_cast<int64_t>(n);
}

// Jinja's int filter: int(value, base) for strings, int(value) otherwise; where that raises
// TypeError, ValueError or OverflowError, int(float(value)); where that does too, the default.
Value int_filter(Interpreter& in, const Value& v, const CallArgs& a) {
  const Value* d = arg(a, "default", 0);
  const Value dflt = d ? *d : Value(0);
  if (v.is_string()) {
    std::string s = py::strip(v.str(), std::nullopt, true, true);
    std::string digits;
    for (char c : s)
      if (c != '_') digits += c;
    if (const auto n = int_in_base(in, digits, arg(a, "base", 1))) return Value(*n);
    char* end = nullptr;
    const double f = digits.empty() ? 0.0 : std::strtod(digits.c_str(), &end);
    if (digits.empty() || *end != '\0' || !std::isfinite(f)) return dflt;
    return Value(truncate_to_int(in, f));
  }
  if (v.is_float()) return std::isfinite(v.to_double()) ? Value(truncate_to_int(in, v.to_double())) : dflt;
  if (v.is_int() || v.is_bool()) return Value(v.to_int());
  return dflt;
}

Value float_filter(const Value& v, const CallArgs& a) {
  const Value* d = arg(a, "default", 0);
  const Value dflt = d ? *d : Value(0.0);
  if (v.is_number()) return Value(v.to_double());
  if (v.is_string()) {
    std::string s = py::strip(v.str(), std::nullopt, true, true);
    for (size_t i = 1; i + 1 < s.size(); ++i)  // float('1_000.5'): underscores between digits
      if (s[i] == '_' && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
          std::isdigit(static_cast<unsigned char>(s[i + 1])))
        s.erase(i, 1);
    char* end = nullptr;
    const double f = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(f);
  }
  return dflt;
}

Value tojson(Interpreter& in, const Value& v, const CallArgs& a) {
  JsonOptions o;
  o.ensure_ascii = flag(a, "ensure_ascii", 0);
  if (const Value* ind = arg(a, "indent", 1); ind && !ind->is_none()) {
    if (ind->is_string()) {
      o.indent = ind->str();
    } else if (ind->is_int() || ind->is_bool()) {
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(ind->to_int(), 0)), ' ');
    } else {
      in.fail("TypeError: indent must be an int or a string");
    }
  }
  if (const Value* sep = arg(a, "separators", 2); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->items().size() != 2 || !sep->items()[0].is_string() ||
        !sep->items()[1].is_string())
      in.fail("separators must be a pair of strings");
    o.separators = std::make_pair(sep->items()[0].str(), sep->items()[1].str());
  }
  o.sort_keys = flag(a, "sort_keys", 3);
  std::string out = to_json(v, o);
  in.check_size(out.size());
  return Value(std::move(out));
}

Value truncate(Interpreter& in, const Value& v, const CallArgs& a) {
  const std::u32string s = py::decode(s_(v));
  const int64_t length = int_arg(in, a, "length", 0, 255);
  const bool killwords = flag(a, "killwords", 1);
  const Value* e = arg(a, "end", 2);
  const std::u32string end = py::decode(e ? s_(*e) : "...");
  const int64_t leeway = int_arg(in, a, "leeway", 3, 5);
  if (static_cast<int64_t>(s.size()) <= length + leeway) return Value(py::encode(s));
  const size_t keep = static_cast<size_t>(std::max<int64_t>(length - static_cast<int64_t>(end.size()), 0));
  if (killwords) return Value(py::encode(s.substr(0, keep) + end));
  std::u32string cut = s.substr(0, keep);
  const size_t sp = cut.rfind(U' ');
  if (sp != std::u32string::npos) cut = cut.substr(0, sp);
  return Value(py::encode(cut + end));
}

const std::map<std::string, FilterFn>& table() {
  static const std::map<std::string, FilterFn> t = [] {
    std::map<std::string, FilterFn> m;
    m["abs"] = [](Interpreter& in, const Value& v, const CallArgs&) {
      if (!v.is_number()) in.fail(fmt::format("TypeError: bad operand type for abs(): '{}'", v.type_name()));
      if (v.is_float()) return Value(std::fabs(v.to_double()));
      if (v.to_int() == INT64_MIN) in.fail("abs: 9223372036854775808 does not fit in 64 bits");
      return Value(static_cast<int64_t>(std::llabs(v.to_int())));
    };
    m["attr"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      const Value* n = arg(a, "name", 0);
      if (!n || !n->is_string()) in.fail("attr: name must be a string");
      // Python's getattr only (no item lookup): a dict's keys are not attributes.
      if (v.is_undefined()) in.fail(v.undef().hint);
      if (v.is_object())
        if (auto attr = v.object()->get_attr(n->str())) return *attr;
      if (auto bound = method(v, n->str())) return *bound;
      return Value::undefined(fmt::format("'{}' object has no attribute '{}'", v.type_name(), n->str()));
    };
    m["batch"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      const int64_t n = int_arg(in, a, "linecount", 0, 1);
      if (n <= 0) in.fail("batch: linecount must be positive");
      const Value* fill = arg(a, "fill_with", 1);
      List out, cur;
      for (const Value& x : iterate(v)) {
        cur.push_back(x);
        if (static_cast<int64_t>(cur.size()) == n) {
          out.push_back(Value::list(std::move(cur)));
          cur.clear();
        }
      }
      if (!cur.empty()) {
        if (fill && !fill->is_none())
          while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
        out.push_back(Value::list(std::move(cur)));
      }
      return Value::iterator(std::move(out));
    };
    m["capitalize"] = [](Interpreter&, const Value& v, const CallArgs&) { return Value(py::capitalize(s_(v))); };
    m["center"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      const int64_t w = int_arg(in, a, "width", 0, 80);
      in.check_size(static_cast<size_t>(std::max<int64_t>(w, 0)));
      return Value(py::pad(s_(v), w, U' ', '^'));
    };
    m["default"] = [](Interpreter&, const Value& v, const CallArgs& a) {
      const Value* d = arg(a, "default_value", 0);
      if (v.is_undefined() || (flag(a, "boolean", 1) && !v.truthy())) return d ? *d : Value("");
      return v;
    };
    m["d"] = m["default"];
    m["dictsort"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      if (!v.is_dict()) in.fail("dictsort: value must be a dict");
      const bool cs = flag(a, "case_sensitive", 0);
      const Value* by = arg(a, "by", 1);
      const bool by_value = by && by->is_string() && by->str() == "value";
      if (by && !(by->is_string() && (by->str() == "key" || by->str() == "value")))
        in.fail("You can only sort by either \"key\" or \"value\"");
      List items;
      for (const auto& [k, x] : v.dict_ref().items) items.push_back(Value::list({k, x}, true));
      return Value::list(sorted(in, std::move(items), flag(a, "reverse", 2), [&](const Value& kv) {
        return sort_key(kv.items()[by_value ? 1 : 0], cs);
      }));
    };
    m["escape"] = [](Interpreter&, const Value& v, const CallArgs&) {
      return v.is_markup() ? v : Value::markup(arith::html_escape(s_(v)));
    };
    m["e"] = m["escape"];
    m["forceescape"] = [](Interpreter&, const Value& v, const CallArgs&) {
      return Value::markup(arith::html_escape(s_(v)));
    };
    m["first"] = [](Interpreter&, const Value& v, const CallArgs&) {
      const List items = iterate(v);
      if (items.empty()) return Value::undefined("No first item, sequence was empty.");
      return items.front();
    };
    m["last"] = [](Interpreter& in, const Value& v, const CallArgs&) {
      if (v.is_iterator())
        in.fail(fmt::format("TypeError: '{}' object is not reversible", v.type_name()));
      const List items = iterate(v);
      if (items.empty()) return Value::undefined("No last item, sequence was empty.");
      return items.back();
    };
    m["float"] = [](Interpreter&, const Value& v, const CallArgs& a) { return float_filter(v, a); };
    m["format"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      if (!a.keyword.empty() && !a.positional.empty())
        in.fail("can't handle positional and keyword arguments at the same time");
      return Value(arith::percent_format(in, s_(v), Value::list(a.positional, true)));
    };
    m["indent"] = [](Interpreter& in, const Value& v, const CallArgs& a) { return Value(indent_filter(in, v, a)); };
    m["int"] = [](Interpreter& in, const Value& v, const CallArgs& a) { return int_filter(in, v, a); };
    m["items"] = [](Interpreter& in, const Value& v, const CallArgs&) {
      if (v.is_undefined()) return Value::iterator({});
      if (!v.is_dict()) in.fail("Can only get item pairs from a mapping.");
      List out;
      for (const auto& [k, x] : v.dict_ref().items) out.push_back(Value::list({k, x}, true));
      return Value::iterator(std::move(out));
    };
    m["join"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      const Value* d = arg(a, "d", 0);
      const Value* attribute = arg(a, "attribute", 1);
      std::string out;
      bool first = true;
      for (const Value& x : iterate(v)) {
        if (!first) out += d ? s_(*d) : "";
        first = false;
        out += s_(attribute && !attribute->is_none() ? attr_path(in, x, *attribute) : x);
        in.check_size(out.size());
      }
      return Value(std::move(out));
    };
    m["length"] = [](Interpreter&, const Value& v, const CallArgs&) { return Value(length(v)); };
    m["count"] = m["length"];
    m["list"] = [](Interpreter&, const Value& v, const CallArgs&) { return Value::list(iterate(v)); };
    m["lower"] = [](Interpreter&, const Value& v, const CallArgs&) { return Value(py::lower(s_(v))); };
    m["upper"] = [](Interpreter&, const Value& v, const CallArgs&) { return Value(py::upper(s_(v))); };
    m["title"] = [](Interpreter&, const Value& v, const CallArgs&) { return Value(title_filter(s_(v))); };
    m["map"] = [](Interpreter& in, const Value& v, const CallArgs& a) { return do_map(in, v, a); };
    for (const bool want_max : {true, false}) {
      m[want_max ? "max" : "min"] = [want_max](Interpreter& in, const Value& v, const CallArgs& a) {
        const bool cs = flag(a, "case_sensitive", 0);
        const Value* attribute = arg(a, "attribute", 1);
        const List items = iterate(v);
        if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
        auto key = [&](const Value& x) {
          return sort_key(attribute && !attribute->is_none() ? attr_path(in, x, *attribute) : x, cs);
        };
        Value best = items[0];
        for (size_t i = 1; i < items.size(); ++i) {
          const bool better = want_max ? less_than(key(best), key(items[i])) : less_than(key(items[i]), key(best));
          if (better) best = items[i];
        }
        return best;
      };
    }
    m["reject"] = [](Interpreter& in, const Value& v, const CallArgs& a) { return select(in, v, a, false, false); };
    m["rejectattr"] = [](Interpreter& in, const Value& v, const CallArgs& a) { return select(in, v, a, true, false); };
    m["select"] = [](Interpreter& in, const Value& v, const CallArgs& a) { return select(in, v, a, false, true); };
    m["selectattr"] = [](Interpreter& in, const Value& v, const CallArgs& a) { return select(in, v, a, true, true); };
    m["replace"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      const Value* old = arg(a, "old", 0);
      const Value* with = arg(a, "new", 1);
      if (!old || !with) in.fail("replace() needs old and new");
      const Value* count = arg(a, "count", 2);
      const int64_t n = count && !count->is_none() ? int_arg(in, a, "count", 2, -1) : -1;
      std::string r = py::replace(s_(v), s_(*old), s_(*with), n);
      in.check_size(r.size());
      return Value(std::move(r));
    };
    m["reverse"] = [](Interpreter&, const Value& v, const CallArgs&) {
      if (v.is_string()) {
        std::u32string chars = py::decode(v.str());
        std::reverse(chars.begin(), chars.end());
        return Value(py::encode(chars));
      }
      List items = iterate(v);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    };
    m["round"] = [](Interpreter& in, const Value& v, const CallArgs& a) { return round_filter(in, v, a); };
    m["safe"] = [](Interpreter&, const Value& v, const CallArgs&) { return Value::markup(s_(v)); };
    m["string"] = [](Interpreter&, const Value& v, const CallArgs&) {
      return v.is_markup() ? v : Value(s_(v));
    };
    m["sort"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      const bool cs = flag(a, "case_sensitive", 1);
      const Value* attribute = arg(a, "attribute", 2);
      return Value::list(sorted(in, iterate(v), flag(a, "reverse", 0), [&](const Value& x) {
        return sort_key(attribute && !attribute->is_none() ? attr_path(in, x, *attribute) : x, cs);
      }));
    };
    m["sum"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      const Value* attribute = arg(a, "attribute", 0);
      const Value* start = arg(a, "start", 1);
      Value total = start ? *start : Value(0);
      for (const Value& x : iterate(v))
        total = arith::binary(in, "+", total, attribute && !attribute->is_none() ? attr_path(in, x, *attribute) : x);
      return total;
    };
    m["tojson"] = [](Interpreter& in, const Value& v, const CallArgs& a) { return tojson(in, v, a); };
    m["trim"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      const Value* chars = arg(a, "chars", 0);
      if (chars && !chars->is_none() && !chars->is_string()) in.fail("TypeError: strip arg must be None or str");
      return Value(py::strip(s_(v), chars && chars->is_string() ? std::optional<std::string>(chars->str()) : std::nullopt, true, true));
    };
    m["truncate"] = [](Interpreter& in, const Value& v, const CallArgs& a) { return truncate(in, v, a); };
    m["unique"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      const bool cs = flag(a, "case_sensitive", 0);
      const Value* attribute = arg(a, "attribute", 1);
      List out, seen;
      for (const Value& x : iterate(v)) {
        const Value k = sort_key(attribute && !attribute->is_none() ? attr_path(in, x, *attribute) : x, cs);
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
        seen.push_back(k);
        out.push_back(x);
      }
      return Value::iterator(std::move(out));
    };
    m["wordcount"] = [](Interpreter&, const Value& v, const CallArgs&) {
      int64_t n = 0;
      bool in_word = false;
      for (char32_t c : py::decode(s_(v))) {
        const bool w = c == '_' || u_isalnum(static_cast<UChar32>(c)) || u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC);
        if (w && !in_word) ++n;
        in_word = w;
      }
      return Value(n);
    };
    return m;
  }();
  return t;
}

}  // namespace

bool has_filter(const std::string& name) { return table().count(name) != 0; }

Value apply_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return table().at(name)(in, v, args);
}

}  // namespace lmx::chat
