#include "engine/chat/interpreter.h"

#include <cmath>

#include "engine/chat/arithmetic.h"
#include "engine/chat/objects.h"

namespace lmx::chat {

// A macro ({% macro %} or the body of a {% call %} block): renders its body in a scope whose
// parent is the scope it was defined in, so it sees the variables live there.
class Macro : public Callable {
 public:
  Macro(const Stmt& def, std::weak_ptr<Interpreter::Scope> closure,
        Value caller, std::string name, const Body& body)
      : def_(def),
        closure_(std::move(closure)),
        caller_(std::move(caller)),
        name_(std::move(name)),
        body_(body),
        takes_varargs_(uses_name(body, "varargs")),
        takes_kwargs_(uses_name(body, "kwargs")),
        takes_caller_(uses_name(body, "caller")) {}

  std::string name() const override { return name_; }
  std::string repr() const override { return "<Macro '" + name_ + "'>"; }

  Value call(Interpreter& in, const CallArgs& args) override {
    in.step();
    if (in.call_depth_ >= in.limits_.max_call_depth)
      in.fail(fmt::format("macro calls nest deeper than {} (infinite recursion?)",
                          in.limits_.max_call_depth));
    auto scope = std::make_shared<Interpreter::Scope>();
    scope->parent = closure_.lock();
    if (!scope->parent) in.fail(fmt::format("macro '{}' called after its render ended", name_));
    const size_t n = def_.params.size();
    std::vector<bool> given(n, false);
    List varargs;
    if (args.positional.size() > n && !takes_varargs_)
      in.fail(fmt::format("TypeError: macro '{}' takes not more than {} argument(s)", name_, n));
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < n) {
        scope->vars[def_.params[i]] = args.positional[i];
        given[i] = true;
      } else {
        varargs.push_back(args.positional[i]);
      }
    }
    Dict kwargs;
    Value caller = caller_;
    for (const auto& [k, v] : args.keyword) {
      if (k == "caller") {
        if (!takes_caller_ && caller_.is_undefined())
          in.fail(fmt::format("TypeError: macro '{}' takes no keyword argument 'caller'", name_));
        caller = v;
        continue;
      }
      bool matched = false;
      for (size_t i = 0; i < n; ++i) {
        if (def_.params[i] != k) continue;
        if (given[i]) in.fail(fmt::format("macro '{}' got multiple values for argument '{}'", name_, k));
        scope->vars[k] = v;
        given[i] = true;
        matched = true;
      }
      if (!matched && !takes_kwargs_)
        in.fail(fmt::format("TypeError: macro '{}' takes no keyword argument '{}'", name_, k));
      if (!matched) kwargs.set(Value(k), v);
    }
    for (size_t i = 0; i < n; ++i) {
      if (given[i]) continue;
      scope->vars[def_.params[i]] =
          def_.defaults[i] ? in.eval(*def_.defaults[i], scope)
                           : Value::undefined(fmt::format("parameter '{}' was not provided",
                                                          def_.params[i]));
    }
    scope->vars["varargs"] = Value::list(std::move(varargs), true);  // a tuple in jinja2
    scope->vars["kwargs"] = Value::dict(std::move(kwargs));
    if (!caller.is_undefined()) scope->vars["caller"] = caller;
    std::string out;
    ++in.call_depth_;
    try {
      in.exec_body(body_, scope, out);
    } catch (...) {
      --in.call_depth_;
      throw;
    }
    --in.call_depth_;
    return Value(std::move(out));
  }

 private:
  const Stmt& def_;
  std::weak_ptr<Interpreter::Scope> closure_;
  Value caller_;
  std::string name_;
  const Body& body_;
  bool takes_varargs_, takes_kwargs_, takes_caller_;
};

Interpreter::Interpreter(Limits limits, std::map<std::string, Value> globals)
    : limits_(limits), globals_(std::move(globals)) {}

Interpreter::~Interpreter() {
  for (const auto& o : owned_) o->clear();
}

void Interpreter::fail(const std::string& message) const {
  throw TemplateError(fmt::format("chat template: line {}: {}", line_, message), false);
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    fail(fmt::format("output larger than {} bytes", limits_.max_output_bytes));
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    fail(fmt::format("template ran more than {} steps (infinite loop?)", limits_.max_steps));
}

void Interpreter::charge(uint64_t units) {
  steps_ += units;
  if (steps_ > limits_.max_steps)
    fail(fmt::format("template ran more than {} steps (infinite loop?)", limits_.max_steps));
}

std::string Interpreter::render(const TemplateAst& ast, const Dict& variables) {
  auto root = std::make_shared<Scope>();
  for (const auto& [k, v] : variables.items)
    if (k.is_string()) root->vars[k.str()] = v;
  std::string out;
  exec_body(ast.body, root, out);
  return out;
}

Value Interpreter::lookup(const std::string& name, const ScopePtr& scope) const {
  for (const Scope* s = scope.get(); s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  auto g = globals_.find(name);
  if (g != globals_.end()) return g->second;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s, scope, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Value Interpreter::make_macro(const Stmt& s, const ScopePtr& scope, Value caller) {
  closures_.push_back(scope);
  return Value(std::shared_ptr<Callable>(
      std::make_shared<Macro>(s, scope, std::move(caller), s.kind == Stmt::kMacro ? s.name : "caller", s.body)));
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
  step();
  line_ = s.line;
  switch (s.kind) {
    case Stmt::kText:
      out += s.text;
      check_size(out.size());
      break;
    case Stmt::kOutput:
      out += to_str(eval(*s.expr, scope));
      check_size(out.size());
      break;
    case Stmt::kIf:
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        line_ = s.line;
        if (eval(*s.conditions[i], scope).truthy()) return exec_body(s.bodies[i], scope, out);
      }
      return exec_body(s.else_body, scope, out);
    case Stmt::kFor:
      exec_for(s, scope, out);
      break;
    case Stmt::kSet:
      assign(s.target, eval(*s.expr, scope), scope);
      break;
    case Stmt::kBlockSet: {
      std::string text;
      exec_body(s.body, scope, text);
      Value v(std::move(text));
      if (s.filter) v = eval_filter(*s.filter, scope, &v);
      assign(s.target, v, scope);
      break;
    }
    case Stmt::kMacro:
      scope->vars[s.name] = make_macro(s, scope, Value());
      break;
    case Stmt::kCallBlock: {
      const Expr& call = *s.expr;
      Value fn = eval(*call.a, scope);
      CallArgs args = eval_args(call, scope);
      args.keyword.emplace_back("caller", make_macro(s, scope, Value()));
      out += to_str(this->call(fn, args));
      check_size(out.size());
      break;
    }
    case Stmt::kFilterBlock: {
      std::string text;
      exec_body(s.body, scope, text);
      const Value input(std::move(text));
      out += to_str(eval_filter(*s.filter, scope, &input));
      check_size(out.size());
      break;
    }
    case Stmt::kWith: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      for (size_t i = 0; i < s.with_targets.size(); ++i)
        assign(s.with_targets[i], eval(*s.with_values[i], scope), inner);
      return exec_body(s.body, inner, out);
    }
    case Stmt::kScope:
      return exec_body(s.body, scope, out);
    case Stmt::kBreak:
      return Flow::kBreak;
    case Stmt::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  run_loop(s, scope, eval(*s.expr, scope), 1, out);
}

void Interpreter::run_loop(const Stmt& s, const ScopePtr& scope, const Value& seq, int depth,
                           std::string& out) {
  if (seq.is_undefined() && seq.undef().unsafe) fail(seq.undef().hint);
  if (depth > limits_.max_call_depth)
    fail(fmt::format("recursive loop deeper than {}", limits_.max_call_depth));
  List items;
  try {
    items = iterate(seq);
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& e) {
    fail(e.what());
  }
  if (s.filter) {
    List kept;
    for (const Value& item : items) {
      step();
      auto fscope = std::make_shared<Scope>();
      fscope->parent = scope;
      assign(s.target, item, fscope);
      if (eval(*s.filter, fscope).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    exec_body(s.else_body, inner, out);
    return;
  }
  auto loop = std::make_shared<LoopObject>(items, depth);
  if (s.recursive) {
    // loop(children) renders this loop's body over children, one level deeper.
    loop->recurse = [this, &s, scope, depth](const Value& children) {
      std::string text;
      ++call_depth_;
      try {
        run_loop(s, scope, children, depth + 1, text);
      } catch (...) {
        --call_depth_;
        throw;
      }
      --call_depth_;
      return text;
    };
  }
  const Value loop_value{std::shared_ptr<Object>(loop)};
  for (size_t i = 0; i < items.size(); ++i) {
    step();
    loop->index0 = static_cast<int64_t>(i);
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    assign(s.target, items[i], inner);
    inner->vars["loop"] = loop_value;
    if (exec_body(s.body, inner, out) == Flow::kBreak) break;
  }
  loop->recurse = nullptr;  // the closure holds the scope; a loop object may outlive the loop
}

void Interpreter::assign(const Target& t, const Value& v, const ScopePtr& scope) {
  if (!t.attr.empty()) {
    const Value ns = lookup(t.name, scope);
    bool ok = false;
    try {
      ok = ns.is_object() && ns.object()->set_attr(t.attr, v);
    } catch (const TemplateError&) {
      throw;
    } catch (const Error& e) {
      fail(e.what());
    }
    if (!ok) fail("cannot assign attribute on non-namespace object");
    return;
  }
  if (!t.is_tuple) {
    scope->vars[t.name] = v;
    return;
  }
  List parts;
  try {
    parts = iterate(v);
  } catch (const Error& e) {
    fail(fmt::format("cannot unpack non-iterable {} object", v.type_name()));
  }
  if (parts.size() != t.items.size())
    fail(parts.size() > t.items.size()
             ? fmt::format("too many values to unpack (expected {})", t.items.size())
             : fmt::format("not enough values to unpack (expected {}, got {})", t.items.size(),
                           parts.size()));
  for (size_t i = 0; i < parts.size(); ++i) assign(t.items[i], parts[i], scope);
}

CallArgs Interpreter::eval_args(const Expr& e, const ScopePtr& scope) {
  CallArgs args;
  for (const ExprPtr& a : e.args) args.positional.push_back(eval(*a, scope));
  for (const auto& [k, a] : e.kwargs) args.keyword.emplace_back(k, eval(*a, scope));
  return args;
}

Value Interpreter::call(const Value& fn, const CallArgs& args) {
  if (fn.is_callable()) {
    step();
    return fn.callable()->call(*this, args);
  }
  if (fn.is_object()) {
    step();
    if (auto r = fn.object()->call(*this, args)) return *r;
  }
  if (fn.is_undefined()) fail(fn.undef().hint);
  fail(fmt::format("'{}' object is not callable", fn.type_name()));
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail(obj.undef().hint);
  if (obj.is_object()) {
    if (auto v = obj.object()->get_attr(name)) return *v;
    return Value::undefined(
        fmt::format("'{}' object has no attribute '{}'", obj.object()->type_name(), name));
  }
  if (auto m = method(obj, name)) return *m;
  if (obj.is_dict())
    if (const Value* v = obj.dict_ref().find(Value(name))) return *v;
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", obj.type_name(), name));
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail(obj.undef().hint);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_ref().find(key)) return *v;
  } else if (((obj.is_list() && !obj.is_iterator()) || obj.is_string()) &&
             (key.is_int() || key.is_bool())) {
    int64_t i = key.to_int();
    if (obj.is_list()) {
      const auto n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
    } else {
      const std::u32string s = py::decode(obj.str());
      const auto n = static_cast<int64_t>(s.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value(py::encode(s.substr(static_cast<size_t>(i), 1)));
    }
    return Value::undefined(fmt::format("'{} object' has no element {}", obj.type_name(), to_str(key)));
  }
  if (key.is_string()) {
    if (obj.is_object()) {
      if (auto v = obj.object()->get_attr(key.str())) return *v;
    } else if (auto m = method(obj, key.str())) {
      return *m;
    }
    return Value::undefined(
        fmt::format("'{} object' has no attribute '{}'", obj.type_name(), key.str()));
  }
  return Value::undefined(fmt::format("'{} object' has no element {}", obj.type_name(), repr(key)));
}

Value Interpreter::filter(const std::string& name, const Value& input, const CallArgs& args) {
  if (!has_filter(name)) fail(fmt::format("No filter named '{}'.", name));
  step();
  try {
    return apply_filter(*this, name, input, args);
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& e) {
    fail(e.what());
  }
}

bool Interpreter::test(const std::string& name, const Value& value, const CallArgs& args) {
  if (!has_test(name)) fail(fmt::format("No test named '{}'.", name));
  try {
    return apply_test(*this, name, value, args);
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& e) {
    fail(e.what());
  }
}

Value Interpreter::eval_filter(const Expr& e, const ScopePtr& scope, const Value* block_input) {
  // Inside {% filter %} / block set chains the innermost filter's input is the rendered body.
  const Value input = !e.a                         ? *block_input
                      : e.a->kind == Expr::kFilter ? eval_filter(*e.a, scope, block_input)
                                                   : eval(*e.a, scope);
  const CallArgs args = eval_args(e, scope);
  line_ = e.line;
  return filter(e.name, input, args);
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case Expr::kLiteral:
      return e.value;
    case Expr::kName:
      return lookup(e.name, scope);
    case Expr::kList:
    case Expr::kTuple: {
      List items;
      for (const ExprPtr& a : e.args) items.push_back(eval(*a, scope));
      return Value::list(std::move(items), e.kind == Expr::kTuple);
    }
    case Expr::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i], scope);
        d.set(std::move(k), eval(*e.args[i + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case Expr::kGetAttr: {
      const Value obj = eval(*e.a, scope);
      line_ = e.line;
      return getattr(obj, e.name);
    }
    case Expr::kGetItem: {
      const Value obj = eval(*e.a, scope);
      const Value key = eval(*e.b, scope);
      line_ = e.line;
      return getitem(obj, key);
    }
    case Expr::kSlice:
      return eval_slice(e, scope);
    case Expr::kCall: {
      const Value fn = eval(*e.a, scope);
      const CallArgs args = eval_args(e, scope);
      line_ = e.line;
      return call(fn, args);
    }
    case Expr::kFilter:
      return eval_filter(e, scope, nullptr);
    case Expr::kTest: {
      const Value v = eval(*e.a, scope);
      const CallArgs args = eval_args(e, scope);
      line_ = e.line;
      return Value(test(e.name, v, args) != e.negated);
    }
    case Expr::kUnary: {
      const Value v = eval(*e.a, scope);
      line_ = e.line;
      if (e.name == "not") return Value(!v.truthy());
      return arith::unary(*this, e.name, v);
    }
    case Expr::kBinary:
      return eval_binary(e, scope);
    case Expr::kCompare:
      return eval_compare(e, scope);
    case Expr::kCondition:
      if (eval(*e.a, scope).truthy()) return eval(*e.b, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
  }
  return Value();
}

Value Interpreter::eval_binary(const Expr& e, const ScopePtr& scope) {
  if (e.name == "and") {
    Value l = eval(*e.a, scope);
    return l.truthy() ? eval(*e.b, scope) : l;
  }
  if (e.name == "or") {
    Value l = eval(*e.a, scope);
    return l.truthy() ? l : eval(*e.b, scope);
  }
  const Value l = eval(*e.a, scope);
  const Value r = eval(*e.b, scope);
  line_ = e.line;
  return arith::binary(*this, e.name, l, r);
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.a, scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i], scope);
    line_ = e.line;
    if (!arith::compare(*this, e.ops[i], left, right)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval_slice(const Expr& e, const ScopePtr& scope) {
  const Value obj = eval(*e.a, scope);
  std::optional<int64_t> parts[3];
  for (size_t i = 0; i < 3; ++i) {
    if (!e.args[i]) continue;
    const Value v = eval(*e.args[i], scope);
    if (v.is_none()) continue;
    if (!v.is_int() && !v.is_bool())
      fail("slice indices must be integers or None or have an __index__ method");
    parts[i] = v.to_int();
  }
  line_ = e.line;
  if (obj.is_undefined()) fail(obj.undef().hint);
  return arith::slice(*this, obj, parts[0], parts[1], parts[2]);
}

}  // namespace lmx::chat
