#include "engine/chat/parser.h"

#include <cstdlib>
#include <initializer_list>

#include "engine/chat/lexer.h"
#include "engine/core/error.h"

namespace lmx::chat {
namespace {

// Nested expressions and blocks deeper than this are refused (the parser recurses).
constexpr int kMaxDepth = 200;

std::string describe(const Token& t) {
  switch (t.type) {
    case Token::kData: return "template text";
    case Token::kVarBegin: return "'{{'";
    case Token::kVarEnd: return "'}}'";
    case Token::kBlockBegin: return "'{%'";
    case Token::kBlockEnd: return "'%}'";
    case Token::kEof: return "end of template";
    case Token::kString: return "string literal";
    default: return "'" + t.value + "'";
  }
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  TemplateAst run() {
    TemplateAst ast;
    ast.body = body({});
    if (cur().type != Token::kEof) fail("unexpected " + describe(cur()));
    return ast;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail("template nests too deeply");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  const Token& cur() const { return t_[pos_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(pos_ + n, t_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("chat template: line {}: {}", cur().line, what));
  }
  bool is_op(const char* op) const { return cur().type == Token::kOp && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == Token::kName && cur().value == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    advance();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(fmt::format("expected '{}', got {}", op, describe(cur())));
  }
  std::string expect_name() {
    if (cur().type != Token::kName) fail("expected a name, got " + describe(cur()));
    std::string n = cur().value;
    advance();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Token::kBlockEnd) fail("expected '%}', got " + describe(cur()));
    advance();
  }
  // At the end of a tuple / expression list: a tag end, ')' or one of the extra end names.
  bool at_tuple_end(std::initializer_list<const char*> extra) const {
    if (cur().type == Token::kVarEnd || cur().type == Token::kBlockEnd || cur().type == Token::kEof)
      return true;
    if (is_op(")")) return true;
    for (const char* e : extra)
      if (is_name(e)) return true;
    return false;
  }

  static ExprPtr make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // ---- statements ---------------------------------------------------------------------------

  // Parses statements until "{% <one of ends> ..." (left at the end tag's name) or the end.
  Body body(std::initializer_list<const char*> ends) {
    DepthGuard guard(*this);
    Body out;
    while (true) {
      const Token& t = cur();
      if (t.type == Token::kEof) {
        if (ends.size() != 0) fail("unexpected end of template, expected " + expected(ends));
        return out;
      }
      if (t.type == Token::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::kText;
        s->line = t.line;
        s->text = t.value;
        out.push_back(std::move(s));
        advance();
      } else if (t.type == Token::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::kOutput;
        s->line = t.line;
        advance();
        s->expr = tuple(true, {});
        if (cur().type != Token::kVarEnd) fail("expected '}}', got " + describe(cur()));
        advance();
        out.push_back(std::move(s));
      } else if (t.type == Token::kBlockBegin) {
        const Token& name = peek();
        for (const char* e : ends) {
          if (name.type == Token::kName && name.value == e) {
            advance();  // leave the parser at the end tag's name
            return out;
          }
        }
        if (name.type == Token::kName &&
            (name.value.rfind("end", 0) == 0 || name.value == "elif" || name.value == "else")) {
          advance();
          fail(fmt::format("unexpected '{}', expected {}", name.value,
                           ends.size() ? expected(ends) : std::string("no end tag here")));
        }
        advance();
        out.push_back(statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  static std::string expected(std::initializer_list<const char*> ends) {
    std::string s;
    for (const char* e : ends) s += (s.empty() ? "'" : " or '") + std::string(e) + "'";
    return s;
  }

  StmtPtr statement() {
    if (cur().type != Token::kName) fail("expected a tag name, got " + describe(cur()));
    const std::string tag = cur().value;
    const int line = cur().line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    advance();
    if (tag == "if") {
      s->kind = Stmt::kIf;
      s->conditions.push_back(tuple(false, {}));
      expect_block_end();
      s->bodies.push_back(body({"elif", "else", "endif"}));
      while (true) {
        const std::string end = expect_name();
        if (end == "elif") {
          s->conditions.push_back(tuple(false, {}));
          expect_block_end();
          s->bodies.push_back(body({"elif", "else", "endif"}));
        } else if (end == "else") {
          expect_block_end();
          s->else_body = body({"endif"});
          advance();
          break;
        } else {
          break;
        }
      }
      expect_block_end();
    } else if (tag == "for") {
      s->kind = Stmt::kFor;
      s->target = assign_target(false, {"in"});
      if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
      s->expr = tuple(false, {"recursive"});
      if (skip_name("if")) s->filter = expression(true);
      if (skip_name("recursive")) s->recursive = true;
      expect_block_end();
      s->body = body({"endfor", "else"});
      if (expect_name() == "else") {
        expect_block_end();
        s->else_body = body({"endfor"});
        advance();
      }
      expect_block_end();
    } else if (tag == "set") {
      s->target = assign_target(true, {});
      if (skip_op("=")) {
        s->kind = Stmt::kSet;
        s->expr = tuple(true, {});
        expect_block_end();
      } else {
        s->kind = Stmt::kBlockSet;
        if (is_op("|")) s->filter = filters(nullptr);
        expect_block_end();
        s->body = body({"endset"});
        advance();
        expect_block_end();
      }
    } else if (tag == "macro") {
      s->kind = Stmt::kMacro;
      s->name = expect_name();
      signature(*s);
      expect_block_end();
      s->body = body({"endmacro"});
      advance();
      if (cur().type == Token::kName && cur().value == s->name) advance();
      expect_block_end();
    } else if (tag == "call") {
      s->kind = Stmt::kCallBlock;
      if (is_op("(")) signature(*s);
      s->expr = expression(true);
      if (s->expr->kind != Expr::kCall) fail("expected a call after 'call'");
      expect_block_end();
      s->body = body({"endcall"});
      advance();
      expect_block_end();
    } else if (tag == "filter") {
      s->kind = Stmt::kFilterBlock;
      s->filter = filters(nullptr, true);
      expect_block_end();
      s->body = body({"endfilter"});
      advance();
      expect_block_end();
    } else if (tag == "with") {
      s->kind = Stmt::kWith;
      while (cur().type != Token::kBlockEnd) {
        if (!s->with_targets.empty()) expect_op(",");
        s->with_targets.push_back(assign_target(false, {}));
        expect_op("=");
        s->with_values.push_back(expression(true));
      }
      expect_block_end();
      s->body = body({"endwith"});
      advance();
      expect_block_end();
    } else if (tag == "generation") {  // transformers' AssistantTracker: renders its body
      s->kind = Stmt::kScope;
      expect_block_end();
      s->body = body({"endgeneration"});
      advance();
      expect_block_end();
    } else if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? Stmt::kBreak : Stmt::kContinue;
      expect_block_end();
    } else {
      throw Error(fmt::format("chat template: line {}: unknown or unsupported tag '{}'", line, tag));
    }
    return s;
  }

  // (a, b=default, ...) of a macro or call block.
  void signature(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (is_op(")")) break;
      s.params.push_back(expect_name());
      s.defaults.push_back(skip_op("=") ? expression(true) : nullptr);
    }
    expect_op(")");
  }

  Target assign_target(bool allow_namespace, std::initializer_list<const char*> extra_end) {
    Target t;
    if (allow_namespace && cur().type == Token::kName && peek().type == Token::kOp &&
        peek().value == ".") {
      t.name = expect_name();
      advance();
      t.attr = expect_name();
      return t;
    }
    auto one = [&]() {
      Target n;
      if (skip_op("(")) {
        n = assign_target(false, {});
        expect_op(")");
        return n;
      }
      n.name = expect_name();
      return n;
    };
    Target first = one();
    if (!is_op(",")) return first;
    t.is_tuple = true;
    t.items.push_back(std::move(first));
    while (skip_op(",")) {
      if (at_tuple_end(extra_end) || is_op("=")) break;
      t.items.push_back(one());
    }
    return t;
  }

  // ---- expressions --------------------------------------------------------------------------

  // Comma-separated expressions: a tuple when there is a comma, else the expression itself.
  ExprPtr tuple(bool with_condexpr, std::initializer_list<const char*> extra_end,
                bool explicit_parens = false) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        comma = true;
      }
      if (at_tuple_end(extra_end)) break;
      items.push_back(expression(with_condexpr));
    }
    if (!comma && items.size() == 1) return std::move(items[0]);
    if (items.empty() && !explicit_parens)
      fail("expected an expression, got " + describe(cur()));
    auto e = make(Expr::kTuple, line);
    e->args = std::move(items);
    return e;
  }

  ExprPtr expression(bool with_condexpr) {
    DepthGuard guard(*this);
    if (!with_condexpr) return or_expr();
    ExprPtr e = or_expr();
    while (is_name("if")) {
      const int line = cur().line;
      advance();
      auto c = make(Expr::kCondition, line);
      c->a = or_expr();
      c->b = std::move(e);
      if (skip_name("else")) c->c = expression(true);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const char* op, ExprPtr l, ExprPtr r, int line) {
    auto e = make(Expr::kBinary, line);
    e->name = op;
    e->a = std::move(l);
    e->b = std::move(r);
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      const int line = cur().line;
      advance();
      e = binary("or", std::move(e), and_expr(), line);
    }
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      const int line = cur().line;
      advance();
      e = binary("and", std::move(e), not_expr(), line);
    }
    return e;
  }

  ExprPtr not_expr() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make(Expr::kUnary, cur().line);
      advance();
      e->name = "not";
      e->a = not_expr();
      return e;
    }
    return compare();
  }

  ExprPtr compare() {
    const int line = cur().line;
    ExprPtr first = math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == Token::kOp &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        op = cur().value;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().type == Token::kName && peek().value == "in") {
        op = "not in";
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::kCompare, line);
        cmp->a = std::move(first);
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().value;
      const int line = cur().line;
      advance();
      e = binary(op == "+" ? "+" : "-", std::move(e), concat(), line);
    }
    return e;
  }

  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) {
      const int line = cur().line;
      advance();
      e = binary("~", std::move(e), math2(), line);
    }
    return e;
  }

  ExprPtr math2() {
    ExprPtr e = pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().value;
      const int line = cur().line;
      advance();
      auto b = make(Expr::kBinary, line);
      b->name = op;
      b->a = std::move(e);
      b->b = pow();
      e = std::move(b);
    }
    return e;
  }

  ExprPtr pow() {
    ExprPtr e = unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      advance();
      e = binary("**", std::move(e), unary(true), line);
    }
    return e;
  }

  ExprPtr unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = make(Expr::kUnary, cur().line);
      e->name = cur().value;
      advance();
      e->a = unary(false);
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.type == Token::kName) {
      auto e = make(Expr::kLiteral, line);
      if (t.value == "true" || t.value == "True") {
        e->value = true;
      } else if (t.value == "false" || t.value == "False") {
        e->value = false;
      } else if (t.value == "none" || t.value == "None") {
        e->value = None{};
      } else {
        e->kind = Expr::kName;
        e->name = t.value;
      }
      advance();
      return e;
    }
    if (t.type == Token::kString) {
      std::string s;
      while (cur().type == Token::kString) {  // adjacent literals concatenate
        s += cur().value;
        advance();
      }
      auto e = make(Expr::kLiteral, line);
      e->value = std::move(s);
      return e;
    }
    if (t.type == Token::kInt || t.type == Token::kFloat) {
      auto e = make(Expr::kLiteral, line);
      if (t.type == Token::kFloat) {
        e->value = std::strtod(t.value.c_str(), nullptr);
      } else {
        int base = 10;
        std::string digits = t.value;
        if (digits.size() > 2 && digits[0] == '0' && !(digits[1] >= '0' && digits[1] <= '9')) {
          base = digits[1] == 'x' ? 16 : digits[1] == 'o' ? 8 : 2;
          digits = digits.substr(2);
        }
        e->value = static_cast<int64_t>(std::strtoll(digits.c_str(), nullptr, base));
      }
      advance();
      return e;
    }
    if (is_op("(")) {
      advance();
      ExprPtr e = tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      advance();
      auto e = make(Expr::kList, line);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      advance();
      auto e = make(Expr::kDict, line);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(expression(true));
        expect_op(":");
        e->args.push_back(expression(true));
      }
      expect_op("}");
      return e;
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      const int line = cur().line;
      if (is_op(".")) {
        advance();
        if (cur().type == Token::kName) {
          auto g = make(Expr::kGetAttr, line);
          g->a = std::move(e);
          g->name = cur().value;
          advance();
          e = std::move(g);
        } else if (cur().type == Token::kInt) {
          auto g = make(Expr::kGetItem, line);
          g->a = std::move(e);
          g->b = make(Expr::kLiteral, line);
          g->b->value = static_cast<int64_t>(std::strtoll(cur().value.c_str(), nullptr, 10));
          advance();
          e = std::move(g);
        } else {
          fail("expected an attribute name after '.', got " + describe(cur()));
        }
      } else if (is_op("[")) {
        advance();
        e = subscript(std::move(e), line);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr target, int line) {
    std::vector<ExprPtr> parts;  // one per ':'-separated slot
    bool is_slice = false;
    std::vector<ExprPtr> index_items;
    bool index_tuple = false;
    // a[i], a[i, j] (a tuple key), or a[start:stop:step]
    while (true) {
      ExprPtr part;
      if (!is_op(":") && !is_op("]") && !is_op(",")) part = expression(true);
      if (is_op(":")) {
        is_slice = true;
        parts.push_back(std::move(part));
        advance();
        ExprPtr stop;
        if (!is_op(":") && !is_op("]")) stop = expression(true);
        parts.push_back(std::move(stop));
        if (skip_op(":")) {
          ExprPtr step;
          if (!is_op("]")) step = expression(true);
          parts.push_back(std::move(step));
        } else {
          parts.push_back(nullptr);
        }
        break;
      }
      if (!part) fail("expected an index, got " + describe(cur()));
      index_items.push_back(std::move(part));
      if (!skip_op(",")) break;
      index_tuple = true;
      if (is_op("]")) break;
    }
    expect_op("]");
    if (is_slice) {
      auto s = make(Expr::kSlice, line);
      s->a = std::move(target);
      s->args = std::move(parts);
      return s;
    }
    auto g = make(Expr::kGetItem, line);
    g->a = std::move(target);
    if (index_tuple) {
      g->b = make(Expr::kTuple, line);
      g->b->args = std::move(index_items);
    } else {
      g->b = std::move(index_items[0]);
    }
    return g;
  }

  // (positional..., name=value...)
  void call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == Token::kName && peek().type == Token::kOp && peek().value == "=") {
        std::string key = cur().value;
        advance();
        advance();
        e.kwargs.emplace_back(std::move(key), expression(true));
      } else {
        if (!e.kwargs.empty()) fail("a positional argument follows a keyword argument");
        e.args.push_back(expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr call(ExprPtr target) {
    auto e = make(Expr::kCall, cur().line);
    e->a = std::move(target);
    call_args(*e);
    return e;
  }

  ExprPtr filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        e = filters(std::move(e));
      } else if (is_name("is")) {
        e = test(std::move(e));
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().type == Token::kName) {
      advance();
      n += '.';
      n += expect_name();
    }
    return n;
  }

  // One or more "| name(args)" applied to `input` (null: the body of a filter block / block set).
  ExprPtr filters(ExprPtr input, bool start_inline = false) {
    bool first = true;
    while (is_op("|") || (start_inline && first)) {
      if (!(start_inline && first)) advance();
      first = false;
      auto f = make(Expr::kFilter, cur().line);
      f->name = dotted_name();
      if (is_op("(")) call_args(*f);
      f->a = std::move(input);
      input = std::move(f);
    }
    return input;
  }

  ExprPtr test(ExprPtr input) {
    auto t = make(Expr::kTest, cur().line);
    advance();  // is
    if (skip_name("not")) t->negated = true;
    t->name = dotted_name();
    t->a = std::move(input);
    if (is_op("(")) {
      call_args(*t);
    } else if ((cur().type == Token::kName || cur().type == Token::kString ||
                cur().type == Token::kInt || cur().type == Token::kFloat || is_op("(") ||
                is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      t->args.push_back(postfix(primary()));
    }
    return t;
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

TemplateAst parse_template(std::string_view source) { return Parser(tokenize(source)).run(); }

}  // namespace lmx::chat
