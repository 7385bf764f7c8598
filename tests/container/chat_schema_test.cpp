// /v1/chat/completions request checking and response pieces (no server, no model).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "container/chat_schema.h"
#include "container/lmi_schema.h"
#include "container/openai_schema.h"

namespace lmx::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const std::string kMsgs = R"("messages": [{"role": "user", "content": "hi"}])";

std::string field_of(const std::string& body) {
  try {
    parse_chat_request(body);
  } catch (const BadRequest& e) {
    return e.field;
  }
  return "(accepted)";
}

TEST(ChatSchema, MapsOpenAiFieldsOntoPluginParameters) {
  ChatRequest r = parse_chat_request(
      "{" + kMsgs +
      R"(, "model": "m", "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9,
          "seed": 3, "stop": "END", "n": 2, "logprobs": true, "top_logprobs": 0,
          "stream": true, "stream_options": {"include_usage": true},
          "chat_template_kwargs": {"enable_thinking": false}, "user": "ignored",
          "frequency_penalty": 0, "presence_penalty": 0.0, "some_future_field": [1]})");
  const ordered_json& p = r.plugin["parameters"];
  EXPECT_EQ(p["max_new_tokens"], 7);
  EXPECT_EQ(p["temperature"], 0.5);
  EXPECT_EQ(p["do_sample"], true);
  EXPECT_EQ(p["top_p"], 0.9);
  EXPECT_EQ(p["stop_sequences"], ordered_json::array({"END"}));
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.logprobs);
  EXPECT_FALSE(p.contains("top_n_tokens"));  // top_logprobs 0: no alternatives asked for
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.plugin["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_FALSE(r.plugin.contains("user"));
  // Choice i samples with seed + i.
  EXPECT_EQ(json::parse(choice_request(r, 0))["parameters"]["seed"], 3);
  EXPECT_EQ(json::parse(choice_request(r, 1))["parameters"]["seed"], 4);
}

TEST(ChatSchema, TopLogprobsAskThePluginForAlternatives) {
  ChatRequest r = parse_chat_request("{" + kMsgs + R"(, "logprobs": true, "top_logprobs": 5})");
  EXPECT_EQ(r.top_logprobs, 5);
  EXPECT_EQ(r.plugin["parameters"]["top_n_tokens"], 5);
}

TEST(ChatSchema, TemperatureZeroIsGreedyAndLmiParametersPassThrough) {
  ChatRequest r = parse_chat_request(
      "{" + kMsgs + R"(, "temperature": 0, "parameters": {"max_new_tokens": 5, "top_k": 3}})");
  EXPECT_FALSE(r.plugin["parameters"].contains("do_sample"));
  EXPECT_EQ(r.plugin["parameters"]["max_new_tokens"], 5);
  EXPECT_EQ(r.plugin["parameters"]["top_k"], 3);
  // max_tokens wins over parameters.max_new_tokens.
  r = parse_chat_request("{" + kMsgs + R"(, "max_tokens": 9, "parameters": {"max_new_tokens": 5}})");
  EXPECT_EQ(r.plugin["parameters"]["max_new_tokens"], 9);
}

TEST(ChatSchema, ToolsKeepTheirKeyOrderAndToolChoiceNoneDropsThem) {
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "get_weather",
         "parameters": {"type": "object", "properties": {"zeta": {}, "alpha": {}}}}}])";
  ChatRequest r = parse_chat_request("{" + kMsgs + ", " + tools + "}");
  EXPECT_TRUE(r.tools);
  EXPECT_EQ(r.plugin["tools"][0]["function"]["parameters"]["properties"].dump(),
            R"({"zeta":{},"alpha":{}})");
  r = parse_chat_request("{" + kMsgs + ", " + tools + R"(, "tool_choice": "none"})");
  EXPECT_FALSE(r.tools);
  EXPECT_FALSE(r.plugin.contains("tools"));
  r = parse_chat_request("{" + kMsgs + ", " + tools + R"(, "tool_choice": "auto"})");
  EXPECT_TRUE(r.tools);
  EXPECT_FALSE(r.plugin.contains("tool_choice"));
  // Forcing a call: the plugin gets tool_choice (it builds the constraint and checks the name).
  for (const char* choice :
       {R"("required")", R"({"type": "function", "function": {"name": "f"}})"}) {
    r = parse_chat_request("{" + kMsgs + ", " + tools + R"(, "tool_choice": )" + choice + "}");
    EXPECT_TRUE(r.tools);
    EXPECT_EQ(r.plugin["tool_choice"], nlohmann::ordered_json::parse(choice));
  }
}

TEST(ChatSchema, WrongTypesNameTheField) {
  EXPECT_EQ(field_of("[1]"), "body");
  EXPECT_EQ(field_of("{"), "body");
  EXPECT_EQ(field_of("{}"), "messages");
  EXPECT_EQ(field_of(R"({"messages": []})"), "messages");
  EXPECT_EQ(field_of(R"({"messages": "hi"})"), "messages");
  for (const auto& [extra, field] : std::vector<std::pair<std::string, std::string>>{
           {R"("max_tokens": "5")", "max_tokens"},
           {R"("max_tokens": 0)", "max_tokens"},
           {R"("max_completion_tokens": 1.5)", "max_completion_tokens"},
           {R"("temperature": "hot")", "temperature"},
           {R"("temperature": 3)", "temperature"},
           {R"("top_p": 0)", "top_p"},
           {R"("seed": -1)", "seed"},
           {R"("stop": 5)", "stop"},
           {R"("n": 0)", "n"},
           {R"("n": 17)", "n"},
           {R"("logprobs": 1)", "logprobs"},
           {R"("top_logprobs": 2)", "top_logprobs"},  // without logprobs: true
           {R"("logprobs": true, "top_logprobs": 21)", "top_logprobs"},
           {R"("logprobs": true, "top_logprobs": 1.5)", "top_logprobs"},
           {R"("stream": "yes")", "stream"},
           {R"("stream_options": {"include_usage": 1})", "stream_options.include_usage"},
           {R"("presence_penalty": 0.5)", "presence_penalty"},
           {R"("frequency_penalty": "0")", "frequency_penalty"},
           {R"("logit_bias": {"5": 1})", "logit_bias"},
           {R"("response_format": {"type": "json_object"})", "response_format"},
           {R"("tools": {})", "tools"},
           {R"("tools": [{"type": "function"}])", "tools[0].function"},
           {R"("tools": [{"type": "function", "function": {"name": ""}}])",
            "tools[0].function.name"},
           {R"("tool_choice": "any")", "tool_choice"},
           {R"("tool_choice": 3)", "tool_choice"},
           {R"("chat_template_kwargs": [1])", "chat_template_kwargs"},
           {R"("parameters": 3)", "parameters"},
           {R"("model": 3)", "model"}}) {
    EXPECT_EQ(field_of("{" + kMsgs + ", " + extra + "}"), field) << extra;
  }
  EXPECT_EQ(field_of("{" + kMsgs + R"(, "max_tokens": null, "tools": null})"), "(accepted)");
}

TEST(ChatSchema, ResponsePieces) {
  ParsedOutput plain{"Hello", {}};
  EXPECT_EQ(assistant_message(plain), (json{{"role", "assistant"}, {"content", "Hello"}}));
  ParsedOutput call{"", {ToolCall{"call_1", "f", R"({"x":1})"}}};
  json m = assistant_message(call);
  EXPECT_TRUE(m["content"].is_null());
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"x":1})");
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(tool_call_deltas(call)[0]["index"], 0);
  json e = logprob_entry(json{{"id", 7}, {"text", "hé"}, {"log_prob", -0.25}});
  EXPECT_EQ(e["bytes"], json::array({104, 195, 169}));
  EXPECT_EQ(e["logprob"], -0.25);
  EXPECT_EQ(e["top_logprobs"], json::array());
  // The plugin's top_tokens (parameters.top_n_tokens) become OpenAI's top_logprobs, in order.
  json alt = logprob_entry(json{{"id", 7}, {"text", "a"}, {"log_prob", -0.5},
                                {"top_tokens", json::array({json{{"id", 7}, {"text", "a"}, {"log_prob", -0.5}},
                                                            json{{"id", 9}, {"text", "b"}, {"log_prob", -1.25}}})}});
  ASSERT_EQ(alt["top_logprobs"].size(), 2u);
  EXPECT_EQ(alt["top_logprobs"][1]["token"], "b");
  EXPECT_EQ(alt["top_logprobs"][1]["logprob"], -1.25);
  EXPECT_EQ(alt["top_logprobs"][1]["bytes"], json::array({98}));
  EXPECT_EQ(usage_json(3, 4)["total_tokens"], 7);
}

}  // namespace
}  // namespace lmx::server

namespace lmx::server {
namespace {

std::string completion_field_of(const std::string& body) {
  try {
    parse_openai_request(body);
  } catch (const BadRequest& e) {
    return e.field;
  }
  return "(accepted)";
}

TEST(CompletionSchema, NLogprobsAndUsageOption) {
  OpenAiRequest r = parse_openai_request(
      R"({"prompt": "a", "n": 3, "logprobs": 0, "stream_options": {"include_usage": true}})");
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.logprobs);
  EXPECT_TRUE(r.include_usage);
  r = parse_openai_request(R"({"prompt": "a", "logprobs": null})");
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(completion_field_of(R"({"prompt": "a", "n": 0})"), "n");
  EXPECT_EQ(completion_field_of(R"({"prompt": "a", "n": 17})"), "n");
  EXPECT_EQ(completion_field_of(R"({"prompt": ["a", "b"], "n": 2})"), "n");
  EXPECT_EQ(completion_field_of(R"({"prompt": ["a", "b"], "logprobs": 0})"), "logprobs");
  EXPECT_EQ(completion_field_of(R"({"prompt": "a", "logprobs": 6})"), "logprobs");
  // logprobs k > 0: the k most likely tokens at each position (the plugin's top_n_tokens).
  r = parse_openai_request(R"({"prompt": "a", "logprobs": 3})");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.lmi["parameters"]["top_n_tokens"], 3);
  EXPECT_EQ(completion_field_of(R"({"prompt": "a", "logprobs": "x"})"), "logprobs");
  EXPECT_EQ(completion_field_of(R"({"prompt": "a", "best_of": 2})"), "best_of");
  EXPECT_EQ(completion_field_of(R"({"prompt": "a", "stream_options": {"include_usage": 1}})"),
            "stream_options.include_usage");
}

}  // namespace
}  // namespace lmx::server
