// Tool-call parsers on hand-written model outputs in each format: well-formed calls become OpenAI
// tool_calls, anything malformed stays plain content, and streaming holds back exactly the text
// that may still turn into a call.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "container/tool_calls.h"

namespace lmx::server {
namespace {

using F = ToolCallFormat;

TEST(ToolCalls, FormatNames) {
  EXPECT_EQ(tool_call_format("hermes"), F::Hermes);
  EXPECT_EQ(tool_call_format("llama3_json"), F::Llama3Json);
  EXPECT_EQ(tool_call_format("mistral"), F::Mistral);
  EXPECT_EQ(tool_call_format(""), F::None);
  EXPECT_EQ(tool_call_format("pythonic"), std::nullopt);
}

TEST(ToolCalls, HermesQwen) {
  auto out = parse_tool_calls(
      F::Hermes,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.content, "Let me check.");
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Paris","unit":"celsius"})");  // key order kept
  EXPECT_EQ(out.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(out.calls[1].name, "get_time");
  EXPECT_EQ(out.calls[1].arguments, "{}");
  EXPECT_NE(out.calls[0].id, out.calls[1].id);
}

TEST(ToolCalls, HermesWithoutClosingTagAtEos) {
  auto out = parse_tool_calls(F::Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(out.content, "");
}

TEST(ToolCalls, MalformedIsPlainContent) {
  for (const std::string text :
       {"<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": </tool_call>",  // cut JSON
        "<tool_call>{\"arguments\": {}}</tool_call>",                       // no name
        "<tool_call>[1, 2]</tool_call>", "<tool_call></tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>"}) {
    auto out = parse_tool_calls(F::Hermes, text);
    EXPECT_TRUE(out.calls.empty()) << text;
    EXPECT_EQ(out.content, text);
  }
  std::string deep = "<tool_call>{\"name\": \"f\", \"arguments\": " + std::string(100, '[') +
                     std::string(100, ']') + "}</tool_call>";
  EXPECT_TRUE(parse_tool_calls(F::Hermes, deep).calls.empty());
  EXPECT_EQ(parse_tool_calls(F::Hermes, "no call here").content, "no call here");
  EXPECT_EQ(parse_tool_calls(F::None, "<tool_call>{\"name\": \"f\"}</tool_call>").calls.size(), 0u);
}

TEST(ToolCalls, Llama3Json) {
  auto out = parse_tool_calls(
      F::Llama3Json, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"San Francisco\"}}");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"San Francisco"})");
  EXPECT_EQ(out.content, "");
  // The python tag, several calls separated by ';', strings holding braces and semicolons.
  out = parse_tool_calls(F::Llama3Json,
                         "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"q\": \"}{;\"}}; "
                         "{\"name\": \"b\", \"arguments\": {}}");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].arguments, R"({"q":"}{;"})");
  EXPECT_EQ(out.calls[1].name, "b");
  // Prose, a JSON answer that is not a call, trailing text: plain content.
  for (const std::string text : {"The weather is fine.", "{\"answer\": 42}",
                                 "{\"name\": \"a\", \"parameters\": {}} and then some text",
                                 "{\"name\": \"a\", \"parameters\": {"}) {
    auto o = parse_tool_calls(F::Llama3Json, text);
    EXPECT_TRUE(o.calls.empty()) << text;
    EXPECT_EQ(o.content, text);
  }
}

TEST(ToolCalls, Mistral) {
  auto out = parse_tool_calls(
      F::Mistral,
      "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
      "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}]");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[1].arguments, R"({"tz":"CET"})");
  // Mistral's template refuses ids that are not 9 alphanumerics when they come back.
  for (const auto& c : out.calls) {
    EXPECT_EQ(c.id.size(), 9u);
    for (char ch : c.id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)));
  }
  // The v11 tokenizer's form.
  out = parse_tool_calls(F::Mistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_TRUE(parse_tool_calls(F::Mistral, "[TOOL_CALLS] [{\"name\": ").calls.empty());
  EXPECT_TRUE(parse_tool_calls(F::Mistral, "[TOOL_CALLS] []").calls.empty());
  EXPECT_EQ(parse_tool_calls(F::Mistral, "Just text").content, "Just text");
}

TEST(ToolCalls, StringArgumentsPassThrough) {
  auto out = parse_tool_calls(F::Hermes,
                              "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, "{\"x\": 1}");
}

TEST(ToolCalls, StreamingHoldsBackOnlyWhatMayBeACall) {
  EXPECT_EQ(tool_call_start(F::Hermes, "Hello"), 5u);
  EXPECT_EQ(tool_call_start(F::Hermes, "Hello <tool"), 6u);  // may become <tool_call>
  EXPECT_EQ(tool_call_start(F::Hermes, "Hello <tool_call>{\"na"), 6u);
  EXPECT_EQ(tool_call_start(F::Hermes, "a < b"), 5u);
  EXPECT_EQ(tool_call_start(F::Hermes, "a <"), 2u);
  EXPECT_EQ(tool_call_start(F::Mistral, "[TOOL"), 0u);
  EXPECT_EQ(tool_call_start(F::Mistral, "[1, 2]"), 6u);
  EXPECT_EQ(tool_call_start(F::Llama3Json, ""), 0u);
  EXPECT_EQ(tool_call_start(F::Llama3Json, "  {\"name\""), 0u);
  EXPECT_EQ(tool_call_start(F::Llama3Json, "<|python"), 0u);
  EXPECT_EQ(tool_call_start(F::Llama3Json, "Sure"), 4u);
  EXPECT_EQ(tool_call_start(F::None, "<tool_call>"), 11u);
}

}  // namespace
}  // namespace lmx::server
