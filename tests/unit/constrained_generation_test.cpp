// Constrained decoding through the engine (scheduler, host redraw, vocabulary trie) with the
// real stories260K model (TinyStories-656K has no "{" token: it cannot write JSON at all): a model
// that never writes a tool call by itself writes exactly one well-formed call, greedy and seeded,
// and the seeded one reproducibly.
#include <condition_variable>
#include <mutex>

#include <gtest/gtest.h>

#include "engine/api/engine.h"
#include "properties/serving_config.h"

namespace lmx {
namespace {

using nlohmann::json;

const std::filesystem::path kModel =
    std::filesystem::path(LMX_SHARED_MODELS_DIR) / "stories260k";  // its vocabulary has every byte

// Runs one request to its end: (text, finish status).
std::pair<std::string, FinishStatus> run(Engine& engine, EngineRequest request) {
  std::mutex m;
  std::condition_variable cv;
  std::string text;
  std::optional<FinishStatus> status;
  engine.enqueue(std::move(request), [&](const RequestUpdate& u) {
    std::lock_guard lock(m);
    text += u.text_delta;
    if (u.finished) status = u.finish_status, cv.notify_all();
  });
  std::unique_lock lock(m);
  cv.wait_for(lock, std::chrono::seconds(60), [&] { return status.has_value(); });
  EXPECT_TRUE(status.has_value());
  return {text, status.value_or(FinishStatus::Error)};
}

TEST(ConstrainedGeneration, WritesOneToolCallThatSatisfiesTheSchema) {
  auto engine = Engine::create(
      properties::load_serving_config(kModel, properties::Environment::from_map({}, 0),
                                      properties::EngineCapabilities::this_build()));
  // Greedy gets a free string; the sampled draws, which would ramble inside one up to
  // max_new_tokens (the string bound is 4096 bytes), enums and integers only.
  json schema = json::parse(R"({"type": "object", "required": ["city", "days"],
      "additionalProperties": false,
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "unit": {"enum": ["celsius", "fahrenheit"]}}})");
  json bounded = schema;
  bounded["properties"]["city"] = {{"enum", {"Paris", "Tokyo"}}};
  const std::string prefix = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ";
  const std::string suffix = "}\n</tool_call>";
  const auto grammar_of = [&](const json& s) {
    return std::make_shared<const JsonGrammar>(
        JsonGrammar{prefix, JsonSchema::compile(s, "parameters", kJsonObject), suffix});
  };
  const auto request = [&](bool sample, uint64_t seed) {
    EngineRequest r;
    r.prompt = "Once upon a time, there was a girl.";
    r.params.max_new_tokens = 200;
    r.params.sampling.greedy = !sample;
    r.params.sampling.seed = seed;
    r.params.constraint = grammar_of(sample ? bounded : schema);
    return r;
  };
  // Without the constraint the model tells a story.
  EngineRequest free = request(false, 0);
  free.params.constraint = nullptr;
  free.params.max_new_tokens = 20;
  EXPECT_EQ(run(*engine, free).first.find("<tool_call>"), std::string::npos);

  std::vector<std::string> seeded;
  for (auto [sample, seed] : {std::pair{false, 0}, {true, 7}, {true, 7}, {true, 8}}) {
    const auto [text, status] = run(*engine, request(sample, uint64_t(seed)));
    SCOPED_TRACE(text);
    EXPECT_EQ(status, FinishStatus::StopSequence);
    ASSERT_EQ(text.rfind(prefix, 0), 0u);
    ASSERT_GE(text.size(), prefix.size() + suffix.size());
    ASSERT_EQ(text.substr(text.size() - suffix.size()), suffix);
    const json args =
        json::parse(text.substr(prefix.size(), text.size() - prefix.size() - suffix.size()));
    ASSERT_TRUE(args.is_object());
    EXPECT_TRUE(args.at("city").is_string());
    EXPECT_TRUE(args.at("days").is_number_integer());
    if (args.contains("unit")) {
      EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit");
    }
    for (const auto& [key, value] : args.items())
      EXPECT_TRUE(key == "city" || key == "days" || key == "unit") << key;
    if (sample) seeded.push_back(text);
  }
  EXPECT_EQ(seeded[0], seeded[1]);  // the same seed draws the same call
}

}  // namespace
}  // namespace lmx
