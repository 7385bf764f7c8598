// The objects templates get from the engine rather than from their data: the `loop` variable,
// namespace() objects, and built-in functions (globals and bound methods).
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "engine/chat/value.h"

namespace lmx::chat {

class Function : public Callable {
 public:
  using Body = std::function<Value(Interpreter&, const CallArgs&)>;
  Function(std::string name, Body body) : name_(std::move(name)), body_(std::move(body)) {}
  Value call(Interpreter& in, const CallArgs& args) override { return body_(in, args); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  Body body_;
};

inline Value make_function(std::string name, Function::Body body) {
  return Value(std::shared_ptr<Callable>(std::make_shared<Function>(std::move(name), std::move(body))));
}

// namespace(a=1): the one mutable object in a sandboxed template ({% set ns.a = 2 %}).
class NamespaceObject : public Object {
 public:
  Dict attrs;
  std::optional<Value> get_attr(const std::string& name) override;
  bool set_attr(const std::string& name, Value value) override;
  std::string repr() const override;
  std::string type_name() const override { return "Namespace"; }
  int depth() const override { return depth_; }
  void clear() override { attrs.items.clear(); }
  // Throws when the attributes nest too deep (namespace(p=namespace(p=...)) in a loop).
  void update_depth(const Value& v);

 private:
  int depth_ = 1;
};

// `loop` inside a for body (index0 is advanced by the interpreter).
class LoopObject : public Object, public std::enable_shared_from_this<LoopObject> {
 public:
  LoopObject(List items, int depth) : items_(std::move(items)), depth_(depth) {}
  int64_t index0 = 0;
  // Set in a `for ... recursive` loop: loop(children) renders the body over children.
  std::function<std::string(const Value&)> recurse;
  std::optional<Value> call(Interpreter& in, const CallArgs& args) override;
  std::optional<Value> get_attr(const std::string& name) override;
  std::string repr() const override;
  std::string type_name() const override { return "LoopContext"; }

 private:
  List items_;
  int depth_;
  bool has_last_changed_ = false;
  Value last_changed_;
};

}  // namespace lmx::chat
