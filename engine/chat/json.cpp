#include "engine/chat/json.h"

#include <algorithm>
#include <cmath>

#include "engine/chat/pystring.h"
#include "engine/core/error.h"

namespace lmx::chat {

namespace {

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  // Deeper data would only overflow the stack later (printing, comparing, tojson).
  if (depth > 500) throw Error("chat template input: JSON nested deeper than 500 levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(None{});
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& x : j) items.push_back(from_json_at(x, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it)
        d.items.emplace_back(Value(it.key()), from_json_at(it.value(), depth + 1));
      return Value::dict(std::move(d));
    }
    default: throw Error("chat template: unsupported JSON value (binary or discarded)");
  }
}

void write_string(std::string& out, const std::string& s, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  auto u4 = [&](unsigned v) {
    out += "\\u";
    for (int k = 3; k >= 0; --k) out += hex[(v >> (4 * k)) & 0xF];
  };
  for (char32_t c : py::decode(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          u4(c);
        } else if (ensure_ascii && c >= 0x7F) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            u4(0xD800 + (v >> 10));
            u4(0xDC00 + (v & 0x3FF));
          } else {
            u4(c);
          }
        } else {
          out += py::encode(std::u32string(1, c));
        }
    }
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

std::string key_string(const Value& k) {
  if (k.is_string()) return k.str();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  if (k.is_int()) return std::to_string(k.as_int());
  if (k.is_float()) return float_json(k.to_double());
  throw Error(fmt::format("TypeError: keys must be str, int, float, bool or None, not {}", k.type_name()));
}

class Writer {
 public:
  explicit Writer(const JsonOptions& o) : o_(o) {
    if (o.separators) {
      item_ = o.separators->first;
      key_ = o.separators->second;
    } else {
      item_ = o.indent ? "," : ", ";
      key_ = ": ";
    }
  }

  void write(const Value& v, int level) {
    if (level > 512) throw Error("ValueError: Circular reference detected (or nesting too deep)");
    if (v.is_none()) {
      out += "null";
    } else if (v.is_bool()) {
      out += v.as_bool() ? "true" : "false";
    } else if (v.is_int()) {
      out += std::to_string(v.as_int());
    } else if (v.is_float()) {
      out += float_json(v.to_double());
    } else if (v.is_string()) {
      write_string(out, v.str(), o_.ensure_ascii);
    } else if (v.is_list() && !v.is_iterator()) {
      const List& l = v.items();
      if (l.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_;
        newline(level + 1);
        write(l[i], level + 1);
      }
      newline(level);
      out += ']';
    } else if (v.is_dict()) {
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, val] : v.dict_ref().items) entries.emplace_back(key_string(k), &val);
      if (o_.sort_keys) {
        for (const auto& [k, val] : v.dict_ref().items)
          if (!k.is_string()) throw Error("TypeError: '<' not supported between keys of mixed types");
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      if (entries.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_;
        newline(level + 1);
        write_string(out, entries[i].first, o_.ensure_ascii);
        out += key_;
        write(*entries[i].second, level + 1);
      }
      newline(level);
      out += '}';
    } else {
      throw Error(fmt::format("TypeError: Object of type {} is not JSON serializable", v.type_name()));
    }
  }

  std::string out;

 private:
  void newline(int level) {
    if (!o_.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }

  const JsonOptions& o_;
  std::string item_, key_;
};

}  // namespace

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

std::string to_json(const Value& v, const JsonOptions& options) {
  Writer w(options);
  w.write(v, 0);
  return std::move(w.out);
}

}  // namespace lmx::chat
