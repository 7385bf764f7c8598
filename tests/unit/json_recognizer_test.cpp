// The constrained decoder's recognizer (engine/generate/json_recognizer.h) and schema subset
// (engine/generate/json_schema.h): what it accepts, where it refuses, when it is complete.
#include "engine/generate/json_recognizer.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"

namespace lmx {
namespace {

using nlohmann::json;

JsonGrammar grammar(const json& schema, std::string prefix = "", std::string suffix = "") {
  return {std::move(prefix), JsonSchema::compile(schema, "schema"), std::move(suffix)};
}

// The offset of the first refused byte, or text.size() when every byte is accepted.
size_t refused_at(const JsonGrammar& g, std::string_view text, bool* complete = nullptr) {
  JsonRecognizer r(g);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!r.accepts(uint8_t(text[i]))) return i;
    EXPECT_TRUE(r.advance(uint8_t(text[i])));
  }
  if (complete) *complete = r.complete();
  return text.size();
}

// Accepted in full and complete.
bool whole(const JsonGrammar& g, std::string_view text) {
  bool complete = false;
  return refused_at(g, text, &complete) == text.size() && complete;
}

TEST(JsonRecognizer, AnyValueWithPrefixAndSuffix) {
  const JsonGrammar g = grammar(json::object(), "<a>", "</a>");
  for (const char* v : {"{}", "[]", "\"x\"", "0", "-1.5e+3", "true", "false", "null",
                        "{\"k\": [1, {\"z\": null}], \"s\": \"\\u00e9\\n\"}", "[1,2]"})
    EXPECT_TRUE(whole(g, std::string("<a>") + v + "</a>")) << v;
  EXPECT_EQ(refused_at(g, "<b>"), 1u);
  EXPECT_EQ(refused_at(g, "<a>{} </a>"), 5u);  // no whitespace before the suffix
  EXPECT_EQ(refused_at(g, "<a> {}"), 3u);      // nor after the prefix
  bool complete = true;
  EXPECT_EQ(refused_at(g, "<a>{}</a", &complete), 8u);
  EXPECT_FALSE(complete);
  JsonRecognizer r(g);
  ASSERT_TRUE(r.advance("<a>1</a>"));
  EXPECT_TRUE(r.complete());
  EXPECT_FALSE(r.accepts('x'));  // nothing after the suffix
}

TEST(JsonRecognizer, RefusesMalformedJsonAtTheRightByte) {
  const JsonGrammar g = grammar(json::object());
  EXPECT_EQ(refused_at(g, "{\"a\" 1}"), 5u);   // a colon is missing
  EXPECT_EQ(refused_at(g, "{\"a\":1,}"), 7u);  // trailing comma
  EXPECT_EQ(refused_at(g, "[1,]"), 3u);
  EXPECT_EQ(refused_at(g, "01"), 1u);  // leading zero
  EXPECT_EQ(refused_at(g, "1."), 2u);  // accepted so far, not complete
  EXPECT_FALSE(whole(g, "1."));
  EXPECT_EQ(refused_at(g, "-x"), 1u);
  EXPECT_EQ(refused_at(g, "tru!"), 3u);
  EXPECT_EQ(refused_at(g, "{'a': 1}"), 1u);
  EXPECT_EQ(refused_at(g, "\"a\tb\""), 2u);  // a raw control character
  EXPECT_EQ(refused_at(g, "\"\\x\""), 2u);   // an unknown escape
  EXPECT_EQ(refused_at(g, "\"\\u12g4\""), 5u);
  EXPECT_EQ(refused_at(g, "}"), 0u);
}

TEST(JsonRecognizer, Utf8AndSurrogates) {
  const JsonGrammar g = grammar(json{{"type", "string"}});
  EXPECT_TRUE(whole(g, "\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\""));
  EXPECT_EQ(refused_at(g, "\"\xC0\xAF\""), 1u);          // overlong
  EXPECT_EQ(refused_at(g, "\"\xED\xA0\x80\""), 2u);      // an encoded surrogate
  EXPECT_EQ(refused_at(g, "\"\xF4\x90\x80\x80\""), 2u);  // past U+10FFFF
  EXPECT_EQ(refused_at(g, "\"\xE2\x82\""), 3u);          // a character cut short
  EXPECT_TRUE(whole(g, "\"\\ud83d\\ude00\""));           // a surrogate pair
  EXPECT_EQ(refused_at(g, "\"\\ud83dx\""), 7u);          // a high one alone
  EXPECT_EQ(refused_at(g, "\"\\ude00\""), 4u);           // a low one alone
  EXPECT_EQ(refused_at(g, "\"\\ud83d\\u0041\""), 10u);
}

TEST(JsonRecognizer, TypesAndLists) {
  // A number is complete only once the byte after it comes: here the suffix.
  EXPECT_FALSE(whole(grammar(json{{"type", "integer"}}), "-42"));
  EXPECT_TRUE(whole(grammar(json{{"type", "integer"}}, "", ";"), "-42;"));
  EXPECT_EQ(refused_at(grammar(json{{"type", "integer"}}), "4.2"), 1u);
  EXPECT_EQ(refused_at(grammar(json{{"type", "integer"}}), "4e2"), 1u);
  EXPECT_TRUE(whole(grammar(json{{"type", "number"}}, "", ";"), "4.25e-2;"));
  EXPECT_EQ(refused_at(grammar(json{{"type", "number"}}), "\"4\""), 0u);
  EXPECT_TRUE(whole(grammar(json{{"type", "boolean"}}), "false"));
  EXPECT_EQ(refused_at(grammar(json{{"type", "boolean"}}), "null"), 0u);
  const JsonGrammar g = grammar(json{{"type", {"string", "null"}}});
  EXPECT_TRUE(whole(g, "null"));
  EXPECT_TRUE(whole(g, "\"x\""));
  EXPECT_EQ(refused_at(g, "1"), 0u);
  EXPECT_EQ(refused_at(g, "{"), 0u);
  const JsonGrammar arr = grammar(json{{"type", "array"}, {"items", {{"type", "integer"}}}});
  EXPECT_TRUE(whole(arr, "[1, 2,3]"));
  EXPECT_TRUE(whole(arr, "[]"));
  EXPECT_EQ(refused_at(arr, "[1, \"2\"]"), 4u);
}

TEST(JsonRecognizer, Enums) {
  const JsonGrammar g = grammar(json{{"enum", {"celsius", "fahrenheit", 1, 10, nullptr}}}, "", ";");
  for (const char* v : {"\"celsius\"", "\"fahrenheit\"", "1", "10", "null"})
    EXPECT_TRUE(whole(g, std::string(v) + ";")) << v;
  EXPECT_EQ(refused_at(g, "\"kelvin\""), 1u);
  EXPECT_EQ(refused_at(g, "\"celsiu\"\""), 7u);
  EXPECT_EQ(refused_at(g, "100"), 2u);
  EXPECT_EQ(refused_at(g, "true"), 0u);
  // Inside an array, a literal that another extends ends at the next byte.
  const JsonGrammar a = grammar(json{{"type", "array"}, {"items", {{"enum", {1, 10}}}}});
  EXPECT_TRUE(whole(a, "[1,10, 1]"));
  EXPECT_TRUE(whole(grammar(json{{"const", "x"}}), "\"x\""));
}

TEST(JsonRecognizer, ObjectsRequiredAndAdditional) {
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"city", {{"type", "string"}}},
                         {"days", {{"type", "integer"}}},
                         {"unit", {{"enum", {"c", "f"}}}}}},
                       {"required", {"city", "days"}}};
  const JsonGrammar g = grammar(schema);
  EXPECT_TRUE(whole(g, R"({"city": "Paris", "days": 3})"));
  EXPECT_TRUE(whole(g, R"({"days":3,"unit":"c","city":"Paris"})"));
  EXPECT_TRUE(whole(g, R"({"city": "Paris", "days": 3, "extra": [true]})"));  // allowed
  EXPECT_EQ(refused_at(g, R"({"city": "Paris"})"), 16u);                      // "days" is required
  EXPECT_EQ(refused_at(g, R"({})"), 1u);
  EXPECT_EQ(refused_at(g, R"({"days": 3.5})"), 10u);
  EXPECT_EQ(refused_at(g, R"({"unit": "k")"), 10u);
  EXPECT_EQ(refused_at(g, R"({"days": 1, "days": 2})"), 17u);  // a property appears once
  json closed = schema;
  closed["additionalProperties"] = false;
  const JsonGrammar c = grammar(closed);
  EXPECT_TRUE(whole(c, R"({"city": "Paris", "days": 3})"));
  EXPECT_EQ(refused_at(c, R"({"cities")"), 5u);  // no declared name goes on with 'i'
  EXPECT_EQ(refused_at(c, R"({"x": 1})"), 2u);
  EXPECT_EQ(refused_at(c, R"({"ci\u0074y": 1})"), 4u);  // escaped keys name no property
  // Every property seen: no further key can start.
  EXPECT_EQ(refused_at(c, R"({"city":"a","days":1,"unit":"c",)"), 31u);
}

TEST(JsonRecognizer, Nesting) {
  const json schema = json::parse(R"({
      "type": "object", "required": ["items"],
      "properties": {"items": {"type": "array", "items": {
          "type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
          "additionalProperties": false}}}})");
  const JsonGrammar g = grammar(schema);
  EXPECT_TRUE(whole(g, R"({"items": [{"id": 1}, {"id": 2}]})"));
  EXPECT_EQ(refused_at(g, R"({"items": [{}]})"), 12u);
  EXPECT_EQ(refused_at(g, R"({"items": [{"id": "1"}]})"), 18u);
  // Any values nest at most kMaxJsonDepth deep.
  const JsonGrammar any = grammar(json::object());
  const std::string deep(kMaxJsonDepth + 1, '[');
  EXPECT_EQ(refused_at(any, deep), size_t(kMaxJsonDepth));
}

TEST(JsonRecognizer, BoundedWhitespaceStringsAndNumbers) {
  const JsonGrammar g = grammar(json::object());
  EXPECT_TRUE(whole(g, "{ \"a\" : 1 , \"b\" :\n[ 2 ] }"));
  EXPECT_EQ(refused_at(g, "{  \"a\": 1}"), 2u);  // two spaces in a row
  EXPECT_EQ(refused_at(g, "[1,\n\n2]"), 4u);
  const std::string at_bound = "\"" + std::string(kMaxJsonStringBytes, 'x');
  EXPECT_EQ(refused_at(g, at_bound + "x\""), at_bound.size());
  EXPECT_TRUE(whole(g, at_bound + "\""));
  const std::string minus17 = "-" + std::string(kMaxJsonIntegerBytes - 1, '9');
  EXPECT_TRUE(whole(grammar(json{{"type", "integer"}}, "", ";"), minus17 + ";"));
  EXPECT_EQ(refused_at(grammar(json{{"type", "integer"}}), minus17 + "9"), minus17.size());
  const std::string digits(kMaxJsonNumberBytes, '1');
  EXPECT_EQ(refused_at(g, digits + "1"), digits.size());
  EXPECT_TRUE(whole(grammar(json::object(), "", "]"), digits + "]"));
  // At the bound a number cannot enter a state that could not end.
  EXPECT_EQ(refused_at(g, std::string(kMaxJsonNumberBytes - 1, '1') + "."),
            size_t(kMaxJsonNumberBytes - 1));
}

TEST(JsonRecognizer, BranchesSelectTheSchemaByPrefix) {
  const JsonGrammar g =
      JsonGrammar::one_of({{"b:", JsonSchema::compile(json{{"type", "integer"}}, "b")},
                           {"a:", JsonSchema::compile(json{{"type", "string"}}, "a")},
                           {"ab:", JsonSchema::compile(json{{"type", "boolean"}}, "ab")}},
                          ";");
  EXPECT_TRUE(whole(g, "a:\"x\";"));
  EXPECT_TRUE(whole(g, "b:12;"));
  EXPECT_TRUE(whole(g, "ab:true;"));
  EXPECT_EQ(refused_at(g, "a:1;"), 2u);
  EXPECT_EQ(refused_at(g, "b:\"x\""), 2u);
  EXPECT_EQ(refused_at(g, "c:"), 0u);
  EXPECT_EQ(refused_at(g, "ac"), 1u);
  EXPECT_THROW(JsonGrammar::one_of({{"a", nullptr}, {"ab", nullptr}}, ""), Error);
  EXPECT_THROW(JsonGrammar::one_of({{"", nullptr}}, ""), Error);
}

TEST(JsonSchema, RefusesWhatItCannotHonour) {
  const auto error_of = [](const json& schema) -> std::string {
    try {
      JsonSchema::compile(schema, "tools[0].function.parameters");
    } catch (const RequestError& e) {
      EXPECT_EQ(e.field().rfind("tools[0].function.parameters", 0), 0u) << e.field();
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(json{{"type", "decimal"}}).find("unknown type \"decimal\""),
            std::string::npos);
  EXPECT_NE(error_of(json{{"enum", json::array()}}).find("at least one"), std::string::npos);
  EXPECT_NE(error_of(json{{"properties", {{"a\"b", json::object()}}}}).find("quote"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"required", {"x"}}}).find("\"x\" is required"), std::string::npos);
  EXPECT_NE(error_of(json(false)).find("allows no value"), std::string::npos);
  EXPECT_NE(error_of(json(3)).find("JSON Schema object"), std::string::npos);
  json deep = json::object();
  for (int i = 0; i < kMaxJsonDepth; ++i) deep = json{{"type", "array"}, {"items", deep}};
  EXPECT_NE(error_of(deep).find("nested deeper"), std::string::npos);
  // Narrowing the root: tool arguments are an object.
  EXPECT_THROW(JsonSchema::compile(json{{"type", "string"}}, "p", kJsonObject), RequestError);
  const JsonGrammar g{"", JsonSchema::compile(json::object(), "p", kJsonObject), ""};
  EXPECT_EQ(refused_at(g, "[]"), 0u);
  EXPECT_TRUE(whole(g, "{}"));
}

}  // namespace
}  // namespace lmx
