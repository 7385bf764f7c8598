// render_chat and where a model directory's chat template comes from.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/chat/chat_template.h"

namespace lmx::chat {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

class ModelDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lmx_chat_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST(RenderChat, PassesWhatApplyChatTemplatePasses) {
  ChatOptions o;
  o.add_generation_prompt = true;
  o.special_tokens["bos_token"] = "<s>";
  o.variables["enable_thinking"] = false;
  const std::string t =
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{{ tools is none }}{{ documents is none }}{{ enable_thinking }}"
      "{% if add_generation_prompt %}<gen>{% endif %}{{ eos_token is defined }}";
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(render_chat(t, messages, o), "<s>[user:hi]TrueTrueFalse<gen>False");
}

TEST(RenderChat, ACompiledTemplateRendersManyRequests) {
  const Template tmpl("{% for m in messages %}{{ m.content }};{% endfor %}");
  ChatOptions o;
  EXPECT_EQ(render_chat(tmpl, ordered_json::parse(R"([{"content": "a"}])"), o), "a;");
  EXPECT_EQ(render_chat(tmpl, ordered_json::parse(R"([{"content": "b"}, {"content": "c"}])"), o), "b;c;");
}

TEST(RenderChat, KeepsTheKeyOrderOfTheRequest) {
  const ordered_json tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  ChatOptions o;
  o.tools = tools;
  EXPECT_EQ(render_chat("{{ tools[0] | tojson }}", ordered_json::array(), o),
            R"({"type": "function", "function": {"name": "f"}})");
}

TEST(RenderChat, StrftimeNowFormatsAFixedTimeWhenGivenOne) {
  // The transformers goldens are rendered with datetime.now() pinned to 2024-07-26 12:00:00;
  // lmx render-chat --now pins LMX's clock the same way. These are the formats real templates use.
  ChatOptions o;
  std::tm now{};
  now.tm_year = 2024 - 1900;
  now.tm_mon = 6;
  now.tm_mday = 26;
  now.tm_hour = 12;
  now.tm_wday = 5;
  now.tm_yday = 207;
  o.now = now;
  EXPECT_EQ(render_chat("{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%d %b %Y') }}|"
                        "{{ strftime_now('%B %d, %Y') }}|{{ strftime_now('%A %H:%M:%S %j') }}",
                        ordered_json::array(), o),
            "2024-07-26|26 Jul 2024|July 26, 2024|Friday 12:00:00 208");
  // Without one, the clock's current year.
  EXPECT_EQ(render_chat("{{ strftime_now('%Y') | length }}", ordered_json::array(), {}), "4");
}

TEST(RenderChat, RaiseExceptionKeepsTheMessage) {
  try {
    render_chat("{{ raise_exception('Only user and assistant roles are supported!') }}",
                ordered_json::array(), {});
    FAIL();
  } catch (const TemplateError& e) {
    EXPECT_TRUE(e.raised());
    EXPECT_STREQ(e.what(), "Only user and assistant roles are supported!");
  }
}

TEST_F(ModelDir, TemplateFromTokenizerConfigString) {
  write("tokenizer_config.json",
        R"({"chat_template": "A{{ bos_token }}", "bos_token": {"content": "<s>"}, "eos_token": "</s>",
            "unk_token": null})");
  const ChatTemplates t = load_chat_templates(dir_.string());
  EXPECT_EQ(t.select(std::nullopt, false), "A{{ bos_token }}");
  const auto special = load_special_tokens(dir_.string());
  EXPECT_EQ(special.at("bos_token"), "<s>");
  EXPECT_EQ(special.at("eos_token"), "</s>");
  EXPECT_EQ(special.count("unk_token"), 0u);
}

TEST_F(ModelDir, NamedTemplatesPickToolUseWhenToolsArePassed) {
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  const ChatTemplates t = load_chat_templates(dir_.string());
  EXPECT_EQ(t.select(std::nullopt, false), "D");
  EXPECT_EQ(t.select(std::nullopt, true), "T");
  EXPECT_EQ(t.select(std::string("default"), true), "D");
  EXPECT_THROW(t.select(std::string("rag"), false), Error);
}

TEST_F(ModelDir, JinjaFileWinsAndOverrideWinsOverAll) {
  write("tokenizer_config.json", R"({"chat_template": "config"})");
  write("chat_template.jinja", "file");
  write("override.jinja", "override");
  EXPECT_EQ(load_chat_templates(dir_.string()).select(std::nullopt, false), "file");
  EXPECT_EQ(load_chat_templates(dir_.string(), (dir_ / "override.jinja").string())
                .select(std::nullopt, false),
            "override");
}

TEST_F(ModelDir, NoTemplateIsAClearError) {
  write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  const ChatTemplates t = load_chat_templates(dir_.string());
  EXPECT_TRUE(t.empty());
  try {
    t.select(std::nullopt, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat template"), std::string::npos);
  }
}

}  // namespace
}  // namespace lmx::chat
