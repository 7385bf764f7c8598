// tool_choice's grammars (plugin/tool_choice.h) against the server's own tool-call parsers
// (container/tool_calls.h): for every format, text the constraint accepts in full parses back
// into exactly one call with the forced name and the arguments as written; the errors name the
// field.
#include "plugin/tool_choice.h"

#include <gtest/gtest.h>

#include "container/tool_calls.h"
#include "engine/core/error.h"

namespace lmx {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time"}}])");

// The grammar accepts `text` in full and is complete.
bool complete(const JsonGrammar& g, const std::string& text) {
  JsonRecognizer r(g);
  return r.advance(std::string_view(text)) && r.complete();
}

struct Case {
  const char* parser;
  server::ToolCallFormat format;
};

class ToolChoiceGrammar : public ::testing::TestWithParam<Case> {};

TEST_P(ToolChoiceGrammar, ParsesBackIntoTheOneForcedCall) {
  const Case c = GetParam();
  const auto named = plugin::tool_choice_grammar(
      c.parser, kTools,
      ordered_json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  ASSERT_TRUE(named);
  const std::string args = R"({"city": "Paris"})";
  const std::string text = named->prefix + args + named->suffix;
  ASSERT_TRUE(complete(*named, text)) << text;
  EXPECT_FALSE(complete(*named, named->prefix + "{}" + named->suffix));  // city is required
  server::ParsedOutput out = server::parse_tool_calls(c.format, text);
  ASSERT_EQ(out.calls.size(), 1u) << text;
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(out.calls[0].arguments), json::parse(args));
  EXPECT_EQ(out.content, "");

  // "required" with several tools: one call of any of them, the name selecting the schema.
  const auto required = plugin::tool_choice_grammar(c.parser, kTools, "required");
  ASSERT_TRUE(required);
  ASSERT_EQ(required->branches.size(), 2u);
  for (const auto& [tool, arguments] :
       {std::pair{"get_time", "{}"}, {"get_weather", args.c_str()}}) {
    const auto& branch = required->branches[tool == std::string("get_time") ? 0 : 1];
    const std::string t = branch.prefix + arguments + required->suffix;
    ASSERT_TRUE(complete(*required, t)) << t;
    out = server::parse_tool_calls(c.format, t);
    ASSERT_EQ(out.calls.size(), 1u) << t;
    EXPECT_EQ(out.calls[0].name, tool);
  }
  // get_weather's own schema applies: its required city.
  EXPECT_FALSE(complete(*required, required->branches[1].prefix + "{}" + required->suffix));
  EXPECT_FALSE(complete(*required, named->prefix.substr(0, named->prefix.size() - 20) +
                                       "get_date\"" + required->suffix));
  // "required" with one tool is that tool named.
  const auto one =
      plugin::tool_choice_grammar(c.parser, ordered_json::array({kTools[0]}), "required");
  EXPECT_EQ(one->prefix, named->prefix);
}

INSTANTIATE_TEST_SUITE_P(Formats, ToolChoiceGrammar,
                         ::testing::Values(Case{"hermes", server::ToolCallFormat::Hermes},
                                           Case{"llama3_json", server::ToolCallFormat::Llama3Json},
                                           Case{"mistral", server::ToolCallFormat::Mistral}),
                         [](const auto& param_info) {
                           return std::string(param_info.param.parser);
                         });

TEST(ToolChoiceGrammar, HermesText) {
  const auto g = plugin::tool_choice_grammar(
      "hermes", kTools,
      ordered_json::parse(R"({"type": "function", "function": {"name": "get_time"}})"));
  EXPECT_EQ(g->prefix, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": ");
  EXPECT_EQ(g->suffix, "}\n</tool_call>");
  EXPECT_TRUE(
      complete(*g, g->prefix + R"({"any": [1]})" + g->suffix));  // no parameters: any object
  EXPECT_EQ(plugin::tool_choice_grammar("hermes", kTools, "auto"), nullptr);
  EXPECT_EQ(plugin::tool_choice_grammar("hermes", kTools, "none"), nullptr);
}

TEST(ToolChoiceGrammar, ErrorsNameTheField) {
  const auto field_of = [](const std::string& parser, const ordered_json& tools,
                           const ordered_json& choice) -> std::string {
    try {
      plugin::tool_choice_grammar(parser, tools, choice);
    } catch (const RequestError& e) {
      return e.field() + " | " + e.what();
    }
    return "(accepted)";
  };
  const ordered_json named =
      ordered_json::parse(R"({"type": "function", "function": {"name": "nope"}})");
  EXPECT_EQ(field_of("hermes", kTools, named),
            "tool_choice.function.name | tool_choice.function.name: no tool named \"nope\" among "
            "the request's tools");
  EXPECT_EQ(field_of("hermes", nullptr, "required").rfind("tool_choice | ", 0), 0u);
  EXPECT_NE(field_of("hermes", ordered_json::array(), named).find("needs a non-empty \"tools\""),
            std::string::npos);
  EXPECT_NE(field_of("", kTools, "required").find("option.tool_call_parser"), std::string::npos);
  EXPECT_EQ(field_of("hermes", kTools, "sometimes").rfind("tool_choice | ", 0), 0u);
  EXPECT_EQ(field_of("hermes", kTools, ordered_json::parse(R"({"type": "function"})"))
                .rfind("tool_choice.function.name | ", 0),
            0u);
  ordered_json bad_schema = kTools;
  bad_schema[0]["function"]["parameters"] = {{"type", "string"}};
  EXPECT_EQ(field_of("hermes", bad_schema, "required").rfind("tools[0].function.parameters | ", 0),
            0u);
  // Only the named tool's schema is compiled.
  EXPECT_EQ(
      field_of("hermes", bad_schema,
               ordered_json::parse(R"({"type": "function", "function": {"name": "get_time"}})")),
      "(accepted)");
  ordered_json twice = kTools;
  twice[1]["function"]["name"] = "get_weather";
  EXPECT_EQ(field_of("hermes", twice, "required").rfind("tools[1].function.name | ", 0), 0u);
}

}  // namespace
}  // namespace lmx
