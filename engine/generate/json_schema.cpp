#include "engine/generate/json_schema.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace lmx {
namespace {

using nlohmann::json;

uint8_t type_bit(const json& name, const std::string& field) {
  static const std::pair<const char*, uint8_t> kNames[] = {
      {"object", kJsonObject}, {"array", kJsonArray},     {"string", kJsonString},
      {"number", kJsonNumber}, {"integer", kJsonInteger}, {"boolean", kJsonBoolean},
      {"null", kJsonNull}};
  if (name.is_string())
    for (const auto& [n, bit] : kNames)
      if (name == n) return bit;
  throw_field_error(field,
                    fmt::format("unknown type {} (allowed: object, array, string, number, integer, "
                                "boolean, null)",
                                name.dump()));
}

bool plain_name(const std::string& name) {
  return std::none_of(name.begin(), name.end(), [](char c) {
    return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20;
  });
}

}  // namespace

std::shared_ptr<const JsonSchema> JsonSchema::compile(const json& schema, const std::string& field,
                                                      uint8_t root_types) {
  auto s = std::make_shared<JsonSchema>();
  SchemaNode* any = &s->nodes_.emplace_back();
  any->items = any;  // an array of any values
  s->any_ = any;
  SchemaNode* root = s->build(schema, field, 0);
  // The root is narrowed below: never narrow the shared "any" node.
  s->root_ = root == s->any_ ? &s->nodes_.emplace_back(*root) : root;
  s->root_->types &= root_types;
  if (s->root_->has_enum) {
    // Keep the literals of the allowed types only.
    std::erase_if(s->root_->literals, [&](const std::string& lit) {
      const uint8_t t = lit[0] == '{'                    ? kJsonObject
                        : lit[0] == '['                  ? kJsonArray
                        : lit[0] == '"'                  ? kJsonString
                        : lit[0] == 't' || lit[0] == 'f' ? kJsonBoolean
                        : lit[0] == 'n'                  ? kJsonNull
                                                         : kJsonNumber | kJsonInteger;
      return (t & root_types) == 0;
    });
    if (s->root_->literals.empty()) throw_field_error(field, "no enum value of the allowed type");
  }
  if (s->root_->types == 0)
    throw_field_error(field, "the schema allows no value of the required type");
  return s;
}

SchemaNode* JsonSchema::build(const json& schema, const std::string& field, int depth) {
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) throw_field_error(field, "the schema false allows no value");
    return any_;
  }
  if (schema.is_null()) return any_;
  if (!schema.is_object()) throw_field_error(field, "must be a JSON Schema object");
  if (depth > kMaxJsonDepth - 2)
    throw_field_error(field, fmt::format("schemas nested deeper than {} levels are not supported",
                                         kMaxJsonDepth - 2));
  SchemaNode& n = nodes_.emplace_back();
  if (auto t = schema.find("type"); t != schema.end()) {
    if (t->is_array()) {
      n.types = 0;
      for (const json& name : *t) n.types |= type_bit(name, field + ".type");
      if (n.types == 0) throw_field_error(field + ".type", "must name at least one type");
    } else {
      n.types = type_bit(*t, field + ".type");
    }
  }
  const auto literals = [&](const json& values, const std::string& f) {
    n.has_enum = true;
    for (const json& v : values) n.literals.push_back(v.dump());
    std::sort(n.literals.begin(), n.literals.end());
    n.literals.erase(std::unique(n.literals.begin(), n.literals.end()), n.literals.end());
    if (n.literals.empty()) throw_field_error(f, "must hold at least one value");
  };
  if (auto c = schema.find("const"); c != schema.end()) {
    literals(json::array({*c}), field + ".const");
  } else if (auto e = schema.find("enum"); e != schema.end()) {
    if (!e->is_array()) throw_field_error(field + ".enum", "must be a list");
    literals(*e, field + ".enum");
  }
  if (auto a = schema.find("additionalProperties"); a != schema.end())
    n.additional = !(a->is_boolean() && !a->get<bool>());
  if (auto p = schema.find("properties"); p != schema.end() && !p->is_null()) {
    if (!p->is_object()) throw_field_error(field + ".properties", "must be an object");
    if (p->size() > size_t(kMaxSchemaProperties))
      throw_field_error(field + ".properties",
                        fmt::format("at most {} properties are supported, got {}",
                                    kMaxSchemaProperties, p->size()));
    std::vector<std::pair<std::string, const SchemaNode*>> props;
    for (auto it = p->begin(); it != p->end(); ++it) {
      if (!plain_name(it.key()))
        throw_field_error(field + ".properties",
                          fmt::format("property name {} holds a quote, a backslash or "
                                      "a control character (not supported)",
                                      json(it.key()).dump()));
      props.emplace_back(it.key(), build(it.value(), field + ".properties." + it.key(), depth + 1));
    }
    std::sort(props.begin(), props.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [name, node] : props) {
      n.names.push_back(name);
      n.properties.push_back(node);
    }
  }
  if (auto r = schema.find("required"); r != schema.end() && !r->is_null()) {
    if (!r->is_array()) throw_field_error(field + ".required", "must be a list of property names");
    for (const json& name : *r) {
      if (!name.is_string())
        throw_field_error(field + ".required", "must be a list of property names");
      auto it = std::lower_bound(n.names.begin(), n.names.end(), name.get<std::string>());
      if (it == n.names.end() || *it != name.get<std::string>())
        throw_field_error(field + ".required",
                          fmt::format("{} is required but not among the properties (not "
                                      "supported: list it under properties)",
                                      name.dump()));
      n.required |= uint64_t(1) << (it - n.names.begin());
    }
  }
  n.items = any_;
  if (auto i = schema.find("items"); i != schema.end() && i->is_object())
    n.items = build(*i, field + ".items", depth + 1);
  return &n;
}

}  // namespace lmx
