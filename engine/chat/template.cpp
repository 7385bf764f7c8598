#include "engine/chat/template.h"

#include <cstdint>
#include <ctime>

#include "engine/chat/objects.h"
#include "engine/chat/parser.h"

namespace lmx::chat {

Template::Template(std::string_view source) {
  auto ast = std::make_shared<TemplateAst>(parse_template(source));
  check_names(*ast);
  ast_ = std::move(ast);
}

std::string Template::render(const Dict& variables, const Limits& limits,
                             const std::optional<std::tm>& now) const {
  Interpreter in(limits, default_globals(now));
  return in.render(*ast_, variables);
}

namespace {

Value range(Interpreter& in, const CallArgs& a) {
  if (!a.keyword.empty()) in.fail("range() takes no keyword arguments");
  std::vector<int64_t> n;
  for (const Value& v : a.positional) {
    if (!v.is_int() && !v.is_bool())
      in.fail(fmt::format("TypeError: '{}' object cannot be interpreted as an integer", v.type_name()));
    n.push_back(v.to_int());
  }
  if (n.empty() || n.size() > 3) in.fail("range expected 1 to 3 arguments");
  const int64_t start = n.size() == 1 ? 0 : n[0];
  const int64_t stop = n.size() == 1 ? n[0] : n[1];
  const int64_t step = n.size() == 3 ? n[2] : 1;
  if (step == 0) in.fail("ValueError: range() arg 3 must not be zero");
  // ceil(|stop - start| / |step|) in unsigned 64 bits: exact for any int64 bounds, no overflow.
  const uint64_t span = step > 0 ? (stop > start ? uint64_t(stop) - uint64_t(start) : 0)
                                 : (start > stop ? uint64_t(start) - uint64_t(stop) : 0);
  const uint64_t stride = step > 0 ? uint64_t(step) : 0 - uint64_t(step);
  const uint64_t count = span / stride + (span % stride != 0 ? 1 : 0);
  // The sandbox's limit (jinja2.sandbox.MAX_RANGE).
  if (count > 100000)
    in.fail("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  List out;
  int64_t v = start;
  for (int i = 0; i < int(count); ++i) {
    out.emplace_back(v);
    if (i + 1 < int(count)) v += step;  // only between two elements, so never past stop
  }
  return Value::list(std::move(out));
}

Dict kwargs_dict(Interpreter& in, const CallArgs& a) {
  Dict d;
  for (const Value& p : a.positional) {
    if (!p.is_dict()) in.fail("dict / namespace expects a mapping or keyword arguments");
    for (const auto& [k, v] : p.dict_ref().items) d.set(k, v);
  }
  for (const auto& [k, v] : a.keyword) d.set(Value(k), v);
  return d;
}

}  // namespace

std::map<std::string, Value> default_globals(const std::optional<std::tm>& now) {
  std::map<std::string, Value> g;
  g["range"] = make_function("range", range);
  g["dict"] = make_function("dict", [](Interpreter& in, const CallArgs& a) {
    return Value::dict(kwargs_dict(in, a));
  });
  g["namespace"] = make_function("namespace", [](Interpreter& in, const CallArgs& a) {
    auto ns = std::make_shared<NamespaceObject>();
    ns->attrs = kwargs_dict(in, a);
    for (const auto& kv : ns->attrs.items) ns->update_depth(kv.second);
    in.own(ns);
    return Value(std::shared_ptr<Object>(ns));
  });
  g["joiner"] = make_function("joiner", [](Interpreter&, const CallArgs& a) {
    const Value* sep = a.get("sep", 0);
    const std::string s = sep ? to_str(*sep) : ", ";
    auto used = std::make_shared<bool>(false);
    return make_function("joiner", [s, used](Interpreter&, const CallArgs&) {
      if (!*used) {
        *used = true;
        return Value("");
      }
      return Value(s);
    });
  });
  // transformers' globals.
  g["raise_exception"] = make_function("raise_exception", [](Interpreter&, const CallArgs& a) -> Value {
    const Value* msg = a.get("message", 0);
    throw TemplateError(msg ? to_str(*msg) : "", true);
  });
  g["strftime_now"] = make_function("strftime_now", [now](Interpreter& in, const CallArgs& a) {
    const Value* f = a.get("format", 0);
    if (!f || !f->is_string()) in.fail("strftime_now expects a format string");
    std::tm tm{};
    if (now) {
      tm = *now;
    } else {
      const std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    char buf[1024];
    const size_t n = std::strftime(buf, sizeof buf, f->str().c_str(), &tm);
    return Value(std::string(buf, n));
  });
  return g;
}

}  // namespace lmx::chat
