// jinja2's built-in tests (`x is defined`, `x is string`, `n is even`, ...), with Python's type
// rules: bool is a number, str / list / dict are sequences and iterables, Undefined is iterable.
#include <functional>
#include <map>

#include "engine/chat/arithmetic.h"
#include "engine/chat/interpreter.h"
#include "engine/chat/pystring.h"

namespace lmx::chat {
namespace {

using TestFn = std::function<bool(Interpreter&, const Value&, const CallArgs&)>;

const Value& operand(Interpreter& in, const CallArgs& a, const char* test) {
  if (a.positional.empty()) in.fail(fmt::format("test '{}' needs an argument", test));
  return a.positional[0];
}

const std::map<std::string, TestFn>& table() {
  static const std::map<std::string, TestFn> t = [] {
    std::map<std::string, TestFn> m;
    m["defined"] = [](Interpreter&, const Value& v, const CallArgs&) { return !v.is_undefined(); };
    m["undefined"] = [](Interpreter&, const Value& v, const CallArgs&) { return v.is_undefined(); };
    m["none"] = [](Interpreter&, const Value& v, const CallArgs&) { return v.is_none(); };
    m["boolean"] = [](Interpreter&, const Value& v, const CallArgs&) { return v.is_bool(); };
    m["true"] = [](Interpreter&, const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); };
    m["false"] = [](Interpreter&, const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); };
    m["integer"] = [](Interpreter&, const Value& v, const CallArgs&) { return v.is_int(); };
    m["float"] = [](Interpreter&, const Value& v, const CallArgs&) { return v.is_float(); };
    m["number"] = [](Interpreter&, const Value& v, const CallArgs&) { return v.is_number(); };
    m["string"] = [](Interpreter&, const Value& v, const CallArgs&) { return v.is_string(); };
    m["mapping"] = [](Interpreter&, const Value& v, const CallArgs&) { return v.is_dict(); };
    m["iterable"] = [](Interpreter&, const Value& v, const CallArgs&) {
      return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
    };
    m["sequence"] = [](Interpreter&, const Value& v, const CallArgs&) {
      return v.is_string() || (v.is_list() && !v.is_iterator()) || v.is_dict() || v.is_undefined();
    };
    m["callable"] = [](Interpreter&, const Value& v, const CallArgs&) {
      return v.is_callable() || v.is_undefined();
    };
    m["sameas"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      const Value& o = operand(in, a, "sameas");
      if (v.is_none() || v.is_bool() || o.is_none() || o.is_bool())
        return v.is_none() == o.is_none() && v.is_bool() == o.is_bool() && equals(v, o);
      if (v.is_list() && o.is_list()) return &v.items() == &o.items();
      // CPython shares small ints and a template's equal string constants.
      if (v.is_int() && o.is_int()) return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
      if (v.is_string() && o.is_string()) return v.str() == o.str();
      if (v.is_dict() && o.is_dict()) return &v.dict_ref() == &o.dict_ref();
      return false;
    };
    m["escaped"] = [](Interpreter&, const Value&, const CallArgs&) { return false; };
    m["in"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      return arith::compare(in, "in", v, operand(in, a, "in"));
    };
    m["lower"] = [](Interpreter&, const Value& v, const CallArgs&) { return py::is_lower(to_str(v)); };
    m["upper"] = [](Interpreter&, const Value& v, const CallArgs&) { return py::is_upper(to_str(v)); };
    m["even"] = [](Interpreter& in, const Value& v, const CallArgs&) {
      return equals(arith::binary(in, "%", v, Value(2)), Value(0));
    };
    m["odd"] = [](Interpreter& in, const Value& v, const CallArgs&) {
      return equals(arith::binary(in, "%", v, Value(2)), Value(1));
    };
    m["divisibleby"] = [](Interpreter& in, const Value& v, const CallArgs& a) {
      return equals(arith::binary(in, "%", v, operand(in, a, "divisibleby")), Value(0));
    };
    const std::pair<const char*, const char*> cmp[] = {
        {"eq", "=="}, {"equalto", "=="}, {"==", "=="}, {"ne", "!="}, {"!=", "!="},
        {"lt", "<"},  {"lessthan", "<"}, {"<", "<"},   {"le", "<="}, {"<=", "<="},
        {"gt", ">"},  {"greaterthan", ">"}, {">", ">"}, {"ge", ">="}, {">=", ">="}};
    for (const auto& [name, op] : cmp) {
      const std::string o = op;
      const std::string n = name;
      m[name] = [o, n](Interpreter& in, const Value& v, const CallArgs& a) {
        return arith::compare(in, o, v, operand(in, a, n.c_str()));
      };
    }
    m["filter"] = [](Interpreter& in, const Value& v, const CallArgs&) {
      return v.is_string() && has_filter(v.str());
    };
    m["test"] = [](Interpreter&, const Value& v, const CallArgs&) {
      return v.is_string() && has_test(v.str());
    };
    return m;
  }();
  return t;
}

}  // namespace

bool has_test(const std::string& name) { return table().count(name) != 0; }

bool apply_test(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  return table().at(name)(in, v, args);
}

}  // namespace lmx::chat
