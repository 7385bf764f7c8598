// The LMI request parser: defaults, every parameter, and errors that name the field.
#include "plugin/lmi_request.h"

#include <gtest/gtest.h>

namespace lmx::plugin {
namespace {

std::string field_of(const std::string& body) {
  try {
    parse_lmi_request(body);
  } catch (const RequestError& e) {
    return e.field();
  }
  return "(accepted)";
}

TEST(LmiRequest, Defaults) {
  auto r = parse_lmi_request(std::string(R"({"inputs": "hello"})"));
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_FALSE(r.batched);
  EXPECT_EQ(r.params.max_new_tokens, 30);
  EXPECT_TRUE(r.params.sampling.greedy);
  EXPECT_FALSE(r.details);
  EXPECT_FALSE(r.stream);
}

TEST(LmiRequest, AllParameters) {
  auto r = parse_lmi_request(std::string(R"({"inputs": ["a", "b"], "stream": true,
    "parameters": {"max_new_tokens": 5, "temperature": 0.7, "top_p": 0.9, "top_k": 40,
    "do_sample": true, "repetition_penalty": 1.2, "stop_sequences": ["x", "y"], "seed": 3,
    "details": true, "return_full_text": true, "top_n_tokens": 5}})"));
  EXPECT_TRUE(r.batched);
  EXPECT_EQ(r.inputs.size(), 2u);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.params.max_new_tokens, 5);
  EXPECT_FALSE(r.params.sampling.greedy);
  EXPECT_FLOAT_EQ(r.params.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(r.params.sampling.top_p, 0.9f);
  EXPECT_EQ(r.params.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.params.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(r.params.stop_sequences.size(), 2u);
  EXPECT_EQ(r.params.sampling.seed, 3u);
  EXPECT_TRUE(r.details);
  EXPECT_TRUE(r.return_full_text);
  EXPECT_EQ(r.params.top_logprobs, 5);
}

TEST(LmiRequest, TemperatureZeroIsGreedy) {
  auto r = parse_lmi_request(
      std::string(R"({"inputs": "a", "parameters": {"do_sample": true, "temperature": 0}})"));
  EXPECT_TRUE(r.params.sampling.greedy);
}

TEST(LmiRequest, ErrorsNameTheField) {
  EXPECT_EQ(field_of("{"), "body");
  EXPECT_EQ(field_of("[1]"), "body");
  EXPECT_EQ(field_of("{}"), "inputs");
  EXPECT_EQ(field_of(R"({"inputs": 3})"), "inputs");
  EXPECT_EQ(field_of(R"({"inputs": ""})"), "inputs");
  EXPECT_EQ(field_of(R"({"inputs": []})"), "inputs");
  EXPECT_EQ(field_of(R"({"inputs": ["a", 2]})"), "inputs[1]");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": 3})"), "parameters");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"max_new_tokens": 0}})"),
            "parameters.max_new_tokens");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"max_new_tokens": 2.5}})"),
            "parameters.max_new_tokens");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"temperature": -1}})"),
            "parameters.temperature");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"top_p": 0}})"), "parameters.top_p");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"top_k": -1}})"), "parameters.top_k");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"do_sample": "yes"}})"),
            "parameters.do_sample");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"repetition_penalty": 0}})"),
            "parameters.repetition_penalty");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"stop_sequences": [1]}})"),
            "parameters.stop_sequences[0]");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"seed": -4}})"), "parameters.seed");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"details": 1}})"), "parameters.details");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"top_n_tokens": 21}})"),
            "parameters.top_n_tokens");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"top_n_tokens": -1}})"),
            "parameters.top_n_tokens");
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"nope": 1}})"), "parameters.nope");
  EXPECT_EQ(field_of(R"({"inputs": "a", "stream": "yes"})"), "stream");
  EXPECT_EQ(field_of(R"({"inputs": "a", "extra": 1})"), "extra");
}

std::string message_of(const std::string& body) {
  try {
    parse_lmi_request(body);
  } catch (const RequestError& e) {
    return e.what();
  }
  return "(accepted)";
}

// Any host may pass any JSON: nesting is bounded before parsing, and an error quotes a short
// prefix of the bad value or key (json::dump recursed once per level, and echoed values whole).
TEST(LmiRequest, HostileJsonGetsShortErrors) {
  std::string deep;
  for (int i = 0; i < 60000; ++i) deep += "{\"a\":";
  deep += "1" + std::string(60000, '}');
  EXPECT_EQ(field_of(R"({"inputs": "a", "parameters": {"seed": )" + deep + "}}"), "body");
  std::string shallow;
  for (int i = 0; i < 60; ++i) shallow += "{\"a\":";
  shallow += "1" + std::string(60, '}');
  std::string body = R"({"inputs": "a", "parameters": {"seed": )" + shallow + "}}";
  EXPECT_EQ(field_of(body), "parameters.seed");
  EXPECT_LT(message_of(body).size(), 200u);
  std::string key(1 << 20, 'k');
  body = R"({"inputs": "a", "parameters": {")" + key + R"(": 1}})";
  EXPECT_LT(field_of(body).size(), 100u);
  EXPECT_LT(message_of(body).size(), 400u);
  EXPECT_LT(message_of(R"({"inputs": "a", ")" + key + R"(": 1})").size(), 400u);
  EXPECT_LT(message_of(R"({"inputs": "a", "parameters": {"seed": ")" + key + R"("}})").size(),
            200u);
}

}  // namespace
}  // namespace lmx::plugin
