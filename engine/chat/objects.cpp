#include "engine/chat/objects.h"

#include <algorithm>

#include "engine/chat/interpreter.h"

namespace lmx::chat {

std::optional<Value> NamespaceObject::get_attr(const std::string& name) {
  if (const Value* v = attrs.find(Value(name))) return *v;
  return std::nullopt;
}

bool NamespaceObject::set_attr(const std::string& name, Value value) {
  update_depth(value);
  attrs.set(Value(name), std::move(value));
  return true;
}

void NamespaceObject::update_depth(const Value& v) {
  depth_ = std::max(depth_, v.depth() + 1);
  if (depth_ > Value::kMaxDepth)
    throw Error(fmt::format("RecursionError: values nested deeper than {} levels", Value::kMaxDepth));
}

std::string NamespaceObject::repr() const { return "<Namespace " + to_str(Value::dict(attrs)) + ">"; }

std::optional<Value> LoopObject::get_attr(const std::string& name) {
  const auto n = static_cast<int64_t>(items_.size());
  if (name == "index0") return Value(index0);
  if (name == "index") return Value(index0 + 1);
  if (name == "revindex") return Value(n - index0);
  if (name == "revindex0") return Value(n - index0 - 1);
  if (name == "first") return Value(index0 == 0);
  if (name == "last") return Value(index0 == n - 1);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(depth_);
  if (name == "depth0") return Value(depth_ - 1);
  if (name == "previtem") {
    if (index0 == 0) return Value::undefined("there is no previous item");
    return items_[static_cast<size_t>(index0 - 1)];
  }
  if (name == "nextitem") {
    if (index0 + 1 >= n) return Value::undefined("there is no next item");
    return items_[static_cast<size_t>(index0 + 1)];
  }
  if (name == "cycle") {
    auto self = shared_from_this();
    return make_function("cycle", [self](Interpreter& in, const CallArgs& args) {
      if (args.positional.empty()) in.fail("no items for cycling given");
      return args.positional[static_cast<size_t>(self->index0) % args.positional.size()];
    });
  }
  if (name == "changed") {
    auto self = shared_from_this();
    return make_function("changed", [self](Interpreter&, const CallArgs& args) {
      const Value v = Value::list(args.positional);
      if (self->has_last_changed_ && equals(v, self->last_changed_)) return Value(false);
      self->has_last_changed_ = true;
      self->last_changed_ = v;
      return Value(true);
    });
  }
  return std::nullopt;
}

std::optional<Value> LoopObject::call(Interpreter& in, const CallArgs& args) {
  if (!recurse) return std::nullopt;
  if (args.positional.size() != 1 || !args.keyword.empty())
    in.fail("loop() takes exactly one argument: the items to recurse into");
  return Value(recurse(args.positional[0]));
}

std::string LoopObject::repr() const {
  return "<LoopContext " + std::to_string(index0 + 1) + "/" + std::to_string(items_.size()) + ">";
}

}  // namespace lmx::chat
