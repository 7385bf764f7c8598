// A chat template: parsed and rendered over a fixed conversation with tools. Template errors are
// lmx errors; limits stop loops and recursion; nothing may crash.
#include <nlohmann/json.hpp>

#include "engine/chat/chat_template.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris? \u00e9\u4e16"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
      {"name": "weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "user", "content": "Thanks"}])");
  lmx::chat::ChatOptions o;
  o.add_generation_prompt = true;
  o.special_tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  o.tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}])");
  lmx::fuzz::expect_only_lmx_errors(
      [&] { lmx::chat::render_chat(std::string(lmx::fuzz::text(data, size)), messages, o); });
  return 0;
}
