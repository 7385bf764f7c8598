// Runs a parsed template over variables, with jinja2's scoping (a for iteration and a macro call
// get their own scope; if does not), its Undefined rules, and the ImmutableSandboxedEnvironment's
// attribute rules. Limits bound the output, the work done and the macro recursion depth, so a
// template that loops forever or recurses without end fails with an error instead of hanging.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "engine/chat/ast.h"
#include "engine/chat/value.h"
#include "engine/core/error.h"

namespace lmx::chat {

struct Limits {
  size_t max_output_bytes = 32u << 20;  // any rendered text or built string
  uint64_t max_steps = 10'000'000;      // statements run + loop iterations + calls (~3 s)
  int max_call_depth = 200;             // nested macro calls
};

// A failure while rendering: the template's own raise_exception (what() is its message verbatim)
// or a runtime error ("chat template: line N: ...").
class TemplateError : public Error {
 public:
  TemplateError(const std::string& message, bool raised) : Error(message), raised_(raised) {}
  // True when the template called raise_exception().
  bool raised() const { return raised_; }

 private:
  bool raised_;
};

class Interpreter {
 public:
  Interpreter(Limits limits, std::map<std::string, Value> globals);
  // Breaks the reference cycles a render can make (namespaces holding themselves).
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  std::string render(const TemplateAst& ast, const Dict& variables);

  // Building blocks for filters, tests, methods and globals.
  Value call(const Value& fn, const CallArgs& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value filter(const std::string& name, const Value& input, const CallArgs& args);
  bool test(const std::string& name, const Value& value, const CallArgs& args);
  [[noreturn]] void fail(const std::string& message) const;
  void check_size(size_t bytes) const;
  void step();
  // Work proportional to data size (copying a string or list that grows in a loop is quadratic):
  // counted against max_steps like statements are.
  void charge(uint64_t units);
  // Objects the template made (namespace()): cleared when the render ends.
  void own(std::shared_ptr<Object> object) { owned_.push_back(std::move(object)); }

 private:
  struct Scope {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Scope> parent;
  };
  using ScopePtr = std::shared_ptr<Scope>;
  enum class Flow { kNormal, kBreak, kContinue };
  friend class Macro;

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out);
  void exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  void run_loop(const Stmt& s, const ScopePtr& scope, const Value& seq, int depth, std::string& out);
  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_binary(const Expr& e, const ScopePtr& scope);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value eval_slice(const Expr& e, const ScopePtr& scope);
  Value eval_filter(const Expr& e, const ScopePtr& scope, const Value* block_input);
  CallArgs eval_args(const Expr& e, const ScopePtr& scope);
  Value lookup(const std::string& name, const ScopePtr& scope) const;
  void assign(const Target& t, const Value& v, const ScopePtr& scope);
  Value make_macro(const Stmt& s, const ScopePtr& scope, Value caller);

  Limits limits_;
  std::map<std::string, Value> globals_;
  // Scopes macros were defined in. A macro refers to its scope weakly (the scope holds the macro),
  // so these keep the scopes alive for the render.
  std::vector<ScopePtr> closures_;
  std::vector<std::shared_ptr<Object>> owned_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  int line_ = 0;
};

// The filters, tests and methods the engine implements (filters.cpp, tests.cpp, methods.cpp).
bool has_filter(const std::string& name);
Value apply_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args);
bool has_test(const std::string& name);
bool apply_test(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args);
// The attribute `name` of a str / list / dict as a bound method, an unsafe Undefined where the
// sandbox forbids it (list.append, dict.update), or nullopt when the type has no such method.
std::optional<Value> method(const Value& self, const std::string& name);

// Checks what jinja2 checks when it compiles: every filter and test outside an if / inline-if
// must exist. Throws TemplateError naming the first unknown one.
void check_names(const TemplateAst& ast);
// Whether statements refer to `name` (jinja2 lets a macro take extra positional / keyword
// arguments only when its body uses varargs / kwargs).
bool uses_name(const Body& body, const std::string& name);

}  // namespace lmx::chat
