#include "engine/chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "engine/chat/pystring.h"
#include "engine/core/error.h"

namespace lmx::chat {

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

Value* Dict::find(const Value& key) {
  for (auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (Value* v = find(key)) {
    *v = std::move(value);
    return;
  }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::get(const std::string& name, size_t index) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return index < positional.size() ? &positional[index] : nullptr;
}

bool Object::set_attr(const std::string&, Value) { return false; }

std::optional<Value> Object::call(Interpreter&, const CallArgs&) { return std::nullopt; }

namespace {

int deepest(const List& items) {
  int d = 0;
  for (const Value& x : items) d = std::max(d, x.depth());
  return d;
}

uint16_t checked_depth(int d) {
  if (d > Value::kMaxDepth)
    throw_error("RecursionError: values nested deeper than {} levels", Value::kMaxDepth);
  return static_cast<uint16_t>(d);
}

}  // namespace

int Value::depth() const {
  if (is_object()) return object()->depth();
  return depth_;
}

Value Value::list(List items, bool tuple) {
  Value v;
  v.depth_ = checked_depth(deepest(items) + 1);
  v.data_ = std::make_shared<List>(std::move(items));
  v.flags_ = tuple ? kTuple : 0;
  return v;
}

Value Value::iterator(List items) {
  Value v = list(std::move(items));
  v.flags_ = kIterator;
  return v;
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.flags_ = kMarkup;
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  int deep = 0;
  for (const auto& [k, x] : d.items) deep = std::max({deep, k.depth(), x.depth()});
  v.depth_ = checked_depth(deep + 1);
  v.data_ = std::make_shared<Dict>(std::move(d));
  return v;
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return to_double() != 0.0;
  if (is_string()) return !str().empty();
  if (is_iterator()) return true;
  if (is_list()) return !items().empty();
  if (is_dict()) return !dict_ref().items.empty();
  return true;
}

std::string Value::type_name() const {
  if (is_undefined()) return "Undefined";
  if (is_none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "str";
  if (is_tuple()) return "tuple";
  if (is_iterator()) return "generator";
  if (is_list()) return "list";
  if (is_dict()) return "dict";
  if (is_callable()) return "function";
  return object()->type_name();
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  // Shortest round-trip digits, then Python's layout: positional for exponents -4..15.
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  std::string sign;
  if (mant[0] == '-') {
    sign = "-";
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  if (exp >= -4 && exp < 16) {
    std::string out;
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." +
            digits.substr(static_cast<size_t>(exp) + 1);
    }
    return sign + out;
  }
  std::string out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return sign + out + ebuf;
}

namespace {

// Python raises RecursionError near 1000 frames; LMX stops values nested deeper than this
// (built by a template or sent in a request) before its own stack runs out.
constexpr int kMaxNesting = 500;

void check_depth(int depth) {
  if (depth > kMaxNesting)
    throw_error("RecursionError: values nested deeper than {} levels", kMaxNesting);
}

// Counts nesting across Object::repr too (a namespace prints its attributes with to_str).
thread_local int g_str_depth = 0;

struct StrDepth {
  StrDepth() {
    if (++g_str_depth > kMaxNesting) {
      g_str_depth = 0;
      throw_error("RecursionError: values nested deeper than {} levels", kMaxNesting);
    }
  }
  ~StrDepth() {
    if (g_str_depth > 0) --g_str_depth;
  }
};

std::string str_impl(const Value& v, int depth, bool as_repr) {
  check_depth(depth);
  const StrDepth guard;
  if (v.is_string()) return as_repr ? py::repr(v.str()) : v.str();
  if (v.is_undefined()) return as_repr ? "Undefined" : "";
  if (v.is_none()) return "None";
  if (v.is_bool()) return v.as_bool() ? "True" : "False";
  if (v.is_int()) return std::to_string(v.as_int());
  if (v.is_float()) return float_repr(v.to_double());
  if (v.is_iterator()) return "<generator object>";
  if (v.is_list()) {
    const List& l = v.items();
    std::string out = v.is_tuple() ? "(" : "[";
    for (size_t i = 0; i < l.size(); ++i) {
      if (i) out += ", ";
      out += str_impl(l[i], depth + 1, true);
    }
    if (v.is_tuple() && l.size() == 1) out += ",";
    return out + (v.is_tuple() ? ")" : "]");
  }
  if (v.is_dict()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, val] : v.dict_ref().items) {
      if (!first) out += ", ";
      first = false;
      out += str_impl(k, depth + 1, true) + ": " + str_impl(val, depth + 1, true);
    }
    return out + "}";
  }
  if (v.is_callable()) return v.callable()->repr();
  return v.object()->repr();
}

bool equals_impl(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    return a.to_int() == b.to_int();
  }
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (a.is_string() && b.is_string()) return a.str() == b.str();
  if (a.is_iterator() || b.is_iterator())
    return a.is_iterator() && b.is_iterator() && &a.items() == &b.items();
  if (a.is_list() && b.is_list()) {
    if (a.is_tuple() != b.is_tuple()) return false;
    const List &x = a.items(), &y = b.items();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equals_impl(x[i], y[i], depth + 1)) return false;
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    const Dict &x = a.dict_ref(), &y = b.dict_ref();
    if (x.items.size() != y.items.size()) return false;
    for (const auto& [k, v] : x.items) {
      const Value* o = y.find(k);
      if (!o || !equals_impl(v, *o, depth + 1)) return false;
    }
    return true;
  }
  if (a.is_callable() && b.is_callable()) return a.callable() == b.callable();
  if (a.is_object() && b.is_object()) return a.object() == b.object();
  return false;
}

bool less_impl(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() < b.to_double();
    return a.to_int() < b.to_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list() && !a.is_iterator() && !b.is_iterator() &&
      a.is_tuple() == b.is_tuple()) {
    const List &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals_impl(x[i], y[i], depth + 1)) continue;
      return less_impl(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  throw_error("TypeError: '<' not supported between instances of '{}' and '{}'", a.type_name(),
              b.type_name());
}

}  // namespace

std::string repr(const Value& v) { return str_impl(v, 0, true); }
std::string to_str(const Value& v) { return str_impl(v, 0, false); }
bool equals(const Value& a, const Value& b) { return equals_impl(a, b, 0); }
bool less_than(const Value& a, const Value& b) { return less_impl(a, b, 0); }

int64_t length(const Value& v) {
  if (v.is_string()) return py::length(v.str());
  if (v.is_iterator()) throw_error("TypeError: object of type 'generator' has no len()");
  if (v.is_list()) return static_cast<int64_t>(v.items().size());
  if (v.is_dict()) return static_cast<int64_t>(v.dict_ref().items.size());
  if (v.is_undefined()) return 0;
  throw_error("TypeError: object of type '{}' has no len()", v.type_name());
}

List iterate(const Value& v) {
  if (v.is_list()) return v.items();
  if (v.is_dict()) {
    List keys;
    for (const auto& kv : v.dict_ref().items) keys.push_back(kv.first);
    return keys;
  }
  if (v.is_string()) {
    List chars;
    for (char32_t c : py::decode(v.str())) chars.emplace_back(py::encode(std::u32string(1, c)));
    return chars;
  }
  if (v.is_undefined()) return {};
  throw_error("TypeError: '{}' object is not iterable", v.type_name());
}

}  // namespace lmx::chat
