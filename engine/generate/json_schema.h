// A JSON Schema subset compiled for constrained decoding (engine/generate/json_recognizer.h).
//
// Honoured keywords:
//   type                  a name or a list of names: object, array, string, number, integer,
//                         boolean, null ("integer" is digits only: no fraction, no exponent);
//   enum, const           the value's JSON text must be one of the literals' compact
//                         serializations (nlohmann's dump(), UTF-8 unescaped), byte for byte;
//   properties, required  every required property must appear; a property may appear once;
//   additionalProperties  false refuses keys outside `properties`; anything else (or absent)
//                         allows them with any JSON value (their schema is not applied);
//   items                 one schema for every element.
// Every other keyword (anyOf, oneOf, allOf, not, $ref, $defs, pattern, format, minimum,
// maximum, minLength, maxLength, minItems, maxItems, prefixItems, uniqueItems, ...) is NOT
// honoured: the value is constrained by the keywords above only, and a schema without any of
// them is any JSON value.
//
// Refused (RequestError naming the field): a schema that is not an object or a boolean, an
// unknown type name, an empty enum, more than kMaxSchemaProperties properties in one object, a
// property name holding '"', '\\' or a control character, required names outside `properties`
// when additionalProperties is false, schemas nested deeper than kMaxJsonDepth - 1 containers.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lmx {

// Frames of the recognizer's stack: nesting of objects and arrays, plus one for the innermost
// string, number or literal being read.
inline constexpr int kMaxJsonDepth = 16;
inline constexpr int kMaxSchemaProperties = 64;

enum JsonTypeBit : uint8_t {
  kJsonObject = 1,
  kJsonArray = 2,
  kJsonString = 4,
  kJsonNumber = 8,
  kJsonInteger = 16,
  kJsonBoolean = 32,
  kJsonNull = 64,
  kJsonAnyType = 127,
};

struct SchemaNode {
  uint8_t types = kJsonAnyType;
  bool has_enum = false;
  std::vector<std::string> literals;  // enum/const serializations, sorted, unique
  // Objects: property names sorted, their schemas in the same order, `required` as bits.
  std::vector<std::string> names;
  std::vector<const SchemaNode*> properties;
  uint64_t required = 0;
  bool additional = true;             // keys outside `names` allowed (with any value)
  const SchemaNode* items = nullptr;  // arrays: the elements' schema (never null once compiled)
};

class JsonSchema {
 public:
  // `field` names the schema in errors (e.g. "tools[0].function.parameters"). `root_types`
  // narrows the top value's types (e.g. kJsonObject for tool-call arguments); nothing left is a
  // RequestError.
  static std::shared_ptr<const JsonSchema> compile(const nlohmann::json& schema,
                                                   const std::string& field,
                                                   uint8_t root_types = kJsonAnyType);
  const SchemaNode* root() const { return root_; }
  const SchemaNode* any() const { return any_; }

 private:
  SchemaNode* build(const nlohmann::json& schema, const std::string& field, int depth);
  std::deque<SchemaNode> nodes_;  // stable addresses
  SchemaNode* root_ = nullptr;
  SchemaNode* any_ = nullptr;  // {}: any JSON value
};

}  // namespace lmx
