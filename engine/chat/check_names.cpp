// jinja2 resolves filter and test names when it compiles a template: an unknown name is an error
// at once, unless it sits in an if statement or an inline if (a "soft" frame), where it only
// fails when reached. A new frame (for body, macro, call and filter blocks, with) is not soft.
#include "engine/chat/interpreter.h"

namespace lmx::chat {
namespace {

void check(const Expr* e, bool soft);

void check_all(const std::vector<ExprPtr>& es, bool soft) {
  for (const ExprPtr& e : es) check(e.get(), soft);
}

void check(const Expr* e, bool soft) {
  if (!e) return;
  if (e->kind == Expr::kCondition) soft = true;
  if (!soft && e->kind == Expr::kFilter && !has_filter(e->name))
    throw TemplateError(fmt::format("chat template: line {}: No filter named '{}'.", e->line, e->name), false);
  if (!soft && e->kind == Expr::kTest && !has_test(e->name))
    throw TemplateError(fmt::format("chat template: line {}: No test named '{}'.", e->line, e->name), false);
  check(e->a.get(), soft);
  check(e->b.get(), soft);
  check(e->c.get(), soft);
  check_all(e->args, soft);
  for (const auto& kv : e->kwargs) check(kv.second.get(), soft);
}

void check_body(const Body& body, bool soft);

void check_stmt(const Stmt& s, bool soft) {
  switch (s.kind) {
    case Stmt::kIf:
      check_all(s.conditions, true);
      for (const Body& b : s.bodies) check_body(b, true);
      check_body(s.else_body, true);
      return;
    case Stmt::kFor:
      check(s.expr.get(), soft);
      check(s.filter.get(), false);
      check_body(s.body, false);
      check_body(s.else_body, false);
      return;
    case Stmt::kMacro:
    case Stmt::kCallBlock:
      check_all(s.defaults, false);
      check(s.expr.get(), soft);
      check_body(s.body, false);
      return;
    case Stmt::kFilterBlock:
    case Stmt::kBlockSet:
      check(s.filter.get(), soft);
      check_body(s.body, false);
      return;
    case Stmt::kWith:
      check_all(s.with_values, soft);
      check_body(s.body, false);
      return;
    default:
      check(s.expr.get(), soft);
      check_body(s.body, soft);
  }
}

void check_body(const Body& body, bool soft) {
  for (const StmtPtr& s : body) check_stmt(*s, soft);
}

bool expr_uses(const Expr* e, const std::string& name) {
  if (!e) return false;
  if (e->kind == Expr::kName && e->name == name) return true;
  if (expr_uses(e->a.get(), name) || expr_uses(e->b.get(), name) || expr_uses(e->c.get(), name))
    return true;
  for (const ExprPtr& x : e->args)
    if (expr_uses(x.get(), name)) return true;
  for (const auto& kv : e->kwargs)
    if (expr_uses(kv.second.get(), name)) return true;
  return false;
}

}  // namespace

void check_names(const TemplateAst& ast) { check_body(ast.body, false); }

bool uses_name(const Body& body, const std::string& name) {
  for (const StmtPtr& s : body) {
    if (expr_uses(s->expr.get(), name) || expr_uses(s->filter.get(), name)) return true;
    for (const ExprPtr& e : s->conditions)
      if (expr_uses(e.get(), name)) return true;
    for (const ExprPtr& e : s->defaults)
      if (expr_uses(e.get(), name)) return true;
    for (const ExprPtr& e : s->with_values)
      if (expr_uses(e.get(), name)) return true;
    for (const Body& b : s->bodies)
      if (uses_name(b, name)) return true;
    // A nested macro's own varargs / kwargs are its own.
    if (s->kind != Stmt::kMacro && (uses_name(s->body, name) || uses_name(s->else_body, name)))
      return true;
  }
  return false;
}

}  // namespace lmx::chat
