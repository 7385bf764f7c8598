// The values a Jinja template computes with. They follow Python's data model, because jinja2 runs
// on Python objects: None, bool, int, float, str, list/tuple, dict (insertion ordered), plus the
// Jinja-only kinds: Undefined (a missing name or key, with the error it raises when misused),
// callables (macros, globals, bound methods) and objects with attributes (namespace(), loop).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace lmx::chat {

class Value;
class Interpreter;

using List = std::vector<Value>;

// An insertion-ordered mapping (Python dict). Chat data has few keys: lookups are linear.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  Value* find(const Value& key);
  void set(Value key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The keyword argument `name`, or the positional one at `index`, or nullptr.
  const Value* get(const std::string& name, size_t index) const;
};

// Something a template can call: a macro, a global function, a bound method.
class Callable {
 public:
  virtual ~Callable() = default;
  virtual Value call(Interpreter& interp, const CallArgs& args) = 0;
  virtual std::string name() const = 0;
  virtual std::string repr() const { return "<function " + name() + ">"; }
};

// An object with attributes: namespace() (mutable through {% set ns.x = ... %}) and loop.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::optional<Value> get_attr(const std::string& name) = 0;
  // False when the object refuses assignment (only namespaces accept it).
  virtual bool set_attr(const std::string& name, Value value);
  virtual std::string repr() const = 0;
  virtual std::string type_name() const = 0;
  // How deep the values it holds nest (see Value::depth).
  virtual int depth() const { return 0; }
  // Drops the values it holds (at the end of a render, to break reference cycles).
  virtual void clear() {}
  // obj(...): nullopt when the object is not callable (only a recursive loop is).
  virtual std::optional<Value> call(Interpreter& interp, const CallArgs& args);
};

struct Undefined {
  std::string hint;     // "'x' is undefined", "'dict object' has no attribute 'y'"
  bool unsafe = false;  // the sandbox refused the attribute: using it is a SecurityError
};

struct None {};

class Value {
 public:
  // Strings are shared, not copied, when values are passed around (contents can be large).
  using Text = std::shared_ptr<const std::string>;
  using Data = std::variant<Undefined, None, bool, int64_t, double, Text,
                            std::shared_ptr<List>, std::shared_ptr<Dict>,
                            std::shared_ptr<Callable>, std::shared_ptr<Object>>;

  Value() : data_(Undefined{}) {}
  Value(None) : data_(None{}) {}
  Value(bool b) : data_(b) {}
  Value(int v) : data_(static_cast<int64_t>(v)) {}
  Value(int64_t v) : data_(v) {}
  Value(double v) : data_(v) {}
  Value(std::string s) : data_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::shared_ptr<Callable> f) : data_(std::move(f)) {}
  Value(std::shared_ptr<Object> o) : data_(std::move(o)) {}

  static Value undefined(std::string hint, bool unsafe = false) {
    Value v;
    v.data_ = Undefined{std::move(hint), unsafe};
    return v;
  }
  static Value list(List items = {}, bool tuple = false);
  // What jinja2's lazy filters (map, select, ...) return: a Python generator. It iterates like a
  // list but has no len(), no index, is always true and is not JSON serializable.
  static Value iterator(List items);
  static Value dict(Dict d = {});
  // markupsafe.Markup (from |safe, |escape): `+` with a plain str escapes the plain side.
  static Value markup(std::string s);

  bool is_undefined() const { return std::holds_alternative<Undefined>(data_); }
  bool is_none() const { return std::holds_alternative<None>(data_); }
  bool is_bool() const { return std::holds_alternative<bool>(data_); }
  bool is_int() const { return std::holds_alternative<int64_t>(data_); }
  bool is_float() const { return std::holds_alternative<double>(data_); }
  // Python's numbers.Number: bool is an int.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<Text>(data_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(data_); }
  bool is_tuple() const { return is_list() && (flags_ & kTuple); }
  bool is_iterator() const { return is_list() && (flags_ & kIterator); }
  bool is_markup() const { return is_string() && (flags_ & kMarkup); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(data_); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<Callable>>(data_); }
  bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(data_); }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  // bool or int as an integer (Python's int(True) == 1).
  int64_t to_int() const { return is_bool() ? (as_bool() ? 1 : 0) : as_int(); }
  double to_double() const { return is_float() ? std::get<double>(data_) : double(to_int()); }
  const std::string& str() const { return *std::get<Text>(data_); }
  const List& items() const { return *std::get<std::shared_ptr<List>>(data_); }
  const Dict& dict_ref() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  const std::shared_ptr<Callable>& callable() const {
    return std::get<std::shared_ptr<Callable>>(data_);
  }
  const std::shared_ptr<Object>& object() const { return std::get<std::shared_ptr<Object>>(data_); }
  const Undefined& undef() const { return std::get<Undefined>(data_); }

  // Nesting depth of containers (0 for scalars). Building a value deeper than kMaxDepth fails:
  // printing, comparing and even destroying it recurse once per level.
  int depth() const;
  static constexpr int kMaxDepth = 500;

  // Python's bool(x).
  bool truthy() const;
  // Python's type name, as jinja2 writes it in messages ("dict", "str", "NoneType").
  std::string type_name() const;

 private:
  enum Flags : uint8_t { kTuple = 1, kIterator = 2, kMarkup = 4 };
  Data data_;
  uint8_t flags_ = 0;
  uint16_t depth_ = 0;  // lists and dicts: 1 + the deepest item
};

// Python's str(x) as jinja2 prints it ({{ x }}): strings as is, None, True, [1, 'a'], {'k': 2}.
// Undefined prints as nothing.
std::string to_str(const Value& v);
// Python's repr(x) ('a', None, [1, 'a']).
std::string repr(const Value& v);
// Python's repr of a float (shortest round trip; 1.0, 1e+16, 1.5e-05, nan, inf).
std::string float_repr(double d);
// Python's x == y (1 == 1.0 == True; lists and dicts deeply; Undefined equals Undefined).
bool equals(const Value& a, const Value& b);
// Python's a < b for numbers, strings and sequences; throws for other pairs.
bool less_than(const Value& a, const Value& b);
// Python's len(); throws for values without one.
int64_t length(const Value& v);
// Python's iter(): list items, dict keys, string characters; Undefined is empty; throws otherwise.
List iterate(const Value& v);

}  // namespace lmx::chat
