// The syntax tree of a parsed template: expressions and statements, as jinja2's parser builds them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat/value.h"

namespace lmx::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // args: items
    kTuple,      // args: items
    kDict,       // args: key, value, key, value, ...
    kGetAttr,    // a.name
    kGetItem,    // a[b]
    kSlice,      // a[args[0]:args[1]:args[2]] (null parts are absent)
    kCall,       // a(args, kwargs)
    kFilter,     // a | name(args, kwargs); a is null inside {% filter %} blocks
    kTest,       // a is [not] name(args, kwargs); negated
    kUnary,      // op a: "-", "+", "not"
    kBinary,     // a op b: + - * / // % ** ~ and or
    kCompare,    // a ops[0] args[0] ops[1] args[1] ...: == != < <= > >= in "not in"
    kCondition,  // b if a else c (c may be null)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;  // name, attribute, filter / test name, or operator
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;  // positional args / items; null entries for absent slice parts
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare
  bool negated = false;          // kTest
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// A for/set target: a name, or a tuple of targets (unpacking), or ns.attr (set only).
struct Target {
  std::string name;
  std::string attr;  // set ns.attr = ...
  std::vector<Target> items;
  bool is_tuple = false;
};

struct Stmt {
  enum Kind {
    kText,       // text
    kOutput,     // {{ expr }}
    kIf,         // conditions[i] -> bodies[i]; else_body
    kFor,        // for target in expr [if filter] body [else else_body]
    kSet,        // set target = expr
    kBlockSet,   // set target [| filter] body endset
    kMacro,      // macro name(params = defaults) body
    kCallBlock,  // call(params) expr body
    kFilterBlock,
    kWith,  // with targets = exprs: body
    kBreak,
    kContinue,
    kScope,  // a body rendered as is ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;     // output, for iterable, set value, call expression, filter chain
  ExprPtr filter;   // for ... if filter; block set's filter chain
  Target target;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  bool recursive = false;  // for ... recursive
  // Macros and call blocks: parameter names with optional defaults.
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // same length as params; null where there is none
  std::vector<Target> with_targets;
  std::vector<ExprPtr> with_values;
};

struct TemplateAst {
  Body body;
};

}  // namespace lmx::chat
