// The plugin's chat requests: a model directory's template rendered with add_generation_prompt,
// its special tokens, tools and chat_template_kwargs; the prompt tokenized without special tokens;
// no template, template errors and bad messages as RequestErrors naming "messages".
#include "plugin/chat_prompt.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

namespace lmx::plugin {
namespace {

namespace fs = std::filesystem;

class ModelDir {
 public:
  explicit ModelDir(const std::string& tag) {
    path_ = fs::temp_directory_path() / ("lmx_chat_prompt_" + std::to_string(::getpid()) + tag);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ModelDir() { fs::remove_all(path_); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

constexpr const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}"
    "{% if m.role == 'robot' %}{{ raise_exception('no robots: ' ~ m.role) }}{% endif %}"
    "[{{ m.role }}]{{ m.content }}\n{% endfor %}"
    "{% if tools %}TOOLS {{ tools | tojson }}\n{% endif %}"
    "{% if add_generation_prompt %}[assistant]{{ greeting | default('') }}{% endif %}";

std::string error_of(const ChatSetup& chat, const std::string& body, std::string* field = nullptr) {
  try {
    parse_request(chat, body);
  } catch (const RequestError& e) {
    if (field != nullptr) *field = e.field();
    return e.what();
  }
  return "(accepted)";
}

TEST(ChatPrompt, RendersTheModelsTemplate) {
  ModelDir dir("_a");
  dir.write("chat_template.jinja", kTemplate);
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": "</s>"})");
  auto chat = load_chat_setup(dir.str(), std::nullopt, "");
  ASSERT_TRUE(chat->load_error.empty()) << chat->load_error;
  LmiRequest r = parse_request(*chat, R"({"messages": [
      {"role": "system", "content": "S"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}],
      "chat_template_kwargs": {"greeting": "Hi"},
      "parameters": {"max_new_tokens": 7}, "stream": true})");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0],
            "<s>[system]S\n[user]a\nb\nTOOLS [{\"type\": \"function\", \"function\": {\"name\": "
            "\"f\", \"parameters\": {\"z\": 1, \"a\": 2}}}]\n[assistant]Hi");
  EXPECT_FALSE(r.add_special_tokens);  // the template wrote BOS
  EXPECT_EQ(r.params.max_new_tokens, 7);
  // Without it: 0, whatever room max_tokens leaves (the engine fills it in).
  EXPECT_EQ(parse_request(*chat, R"({"messages": [{"role": "user", "content": "x"}]})")
                .params.max_new_tokens,
            0);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(chat->tool_call_parser, "");
  // Plain LMI requests are untouched.
  LmiRequest plain = parse_request(*chat, R"({"inputs": "hello"})");
  EXPECT_EQ(plain.inputs[0], "hello");
  EXPECT_TRUE(plain.add_special_tokens);
}

TEST(ChatPrompt, ErrorsNameTheField) {
  ModelDir dir("_b");
  dir.write("chat_template.jinja", kTemplate);
  auto chat = load_chat_setup(dir.str(), std::nullopt, "");
  std::string field;
  // raise_exception's message verbatim.
  EXPECT_EQ(error_of(*chat, R"({"messages": [{"role": "robot", "content": "x"}]})", &field),
            "no robots: robot");
  EXPECT_EQ(field, "messages");
  EXPECT_NE(error_of(*chat, R"({"messages": []})", &field).find("non-empty"), std::string::npos);
  error_of(*chat, R"({"messages": [{"content": "x"}]})", &field);
  EXPECT_EQ(field, "messages[0].role");
  error_of(*chat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", &field);
  EXPECT_EQ(field, "messages[0].content[0].type");
  error_of(*chat, R"({"messages": [{"role": "user", "content": 3}]})", &field);
  EXPECT_EQ(field, "messages[0].content");
  error_of(*chat, R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", &field);
  EXPECT_EQ(field, "tools");
  error_of(*chat, R"({"messages": [{"role": "user", "content": "x"}], "extra": 1})", &field);
  EXPECT_EQ(field, "extra");
  error_of(*chat, R"({"messages": [{"role": "user", "content": "x"}], "parameters": {"top_p": 2}})",
           &field);
  EXPECT_EQ(field, "parameters.top_p");
}

// tool_choice "required" / a named function: the request carries the grammar of one call in the
// model's format (plugin/tool_choice.h); "none" renders no tools; errors name the field.
TEST(ChatPrompt, ToolChoiceConstrainsTheOutput) {
  ModelDir dir("_t");
  dir.write("chat_template.jinja", kTemplate);
  auto chat = load_chat_setup(dir.str(), std::nullopt, "hermes");
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}])";
  LmiRequest r = parse_request(*chat, "{" + msgs + ", " + tools + R"(, "tool_choice": {"type":
      "function", "function": {"name": "f"}}})");
  ASSERT_TRUE(r.params.constraint);
  EXPECT_EQ(r.params.constraint->prefix, "<tool_call>\n{\"name\": \"f\", \"arguments\": ");
  EXPECT_TRUE(parse_request(*chat, "{" + msgs + ", " + tools + R"(, "tool_choice": "required"})")
                  .params.constraint);
  EXPECT_FALSE(parse_request(*chat, "{" + msgs + ", " + tools + R"(, "tool_choice": "auto"})")
                   .params.constraint);
  r = parse_request(*chat, "{" + msgs + ", " + tools + R"(, "tool_choice": "none"})");
  EXPECT_FALSE(r.params.constraint);
  EXPECT_EQ(r.inputs[0].find("TOOLS"), std::string::npos);
  std::string field;
  EXPECT_NE(error_of(*chat, "{" + msgs + R"(, "tool_choice": "required"})", &field)
                .find("needs a non-empty \"tools\""),
            std::string::npos);
  EXPECT_EQ(field, "tool_choice");
  error_of(*chat, "{" + msgs + ", " + tools + R"(, "tool_choice": {"function": {"name": "g"}}})",
           &field);
  EXPECT_EQ(field, "tool_choice.function.name");
  // A model whose template names no format cannot be forced.
  auto plain = load_chat_setup(dir.str(), std::nullopt, "");
  EXPECT_NE(error_of(*plain, "{" + msgs + ", " + tools + R"(, "tool_choice": "required"})", &field)
                .find("option.tool_call_parser"),
            std::string::npos);
}

TEST(ChatPrompt, NoTemplateOrABrokenOne) {
  ModelDir none("_c");
  auto chat = load_chat_setup(none.str(), std::nullopt, "");
  std::string field;
  EXPECT_NE(error_of(*chat, R"({"messages": [{"role": "user", "content": "x"}]})", &field)
                .find("no chat template"),
            std::string::npos);
  EXPECT_EQ(field, "messages");
  EXPECT_EQ(parse_request(*chat, R"({"inputs": "still fine"})").inputs[0], "still fine");
  ModelDir broken("_d");
  broken.write("chat_template.jinja", "{% for m in messages %}{{ m.content }");
  chat = load_chat_setup(broken.str(), std::nullopt, "");
  EXPECT_NE(error_of(*chat, R"({"messages": [{"role": "user", "content": "x"}]})")
                .find("does not compile"),
            std::string::npos);
  // option.chat_template overrides, option.tool_call_parser wins over the template's.
  broken.write("other.jinja", "{{ messages[0].content }}<tool_call>");
  chat = load_chat_setup(broken.str(), (fs::path(broken.str()) / "other.jinja").string(), "");
  EXPECT_EQ(parse_request(*chat, R"({"messages": [{"role": "user", "content": "x"}]})").inputs[0],
            "x<tool_call>");
  EXPECT_EQ(chat->tool_call_parser, "hermes");
  chat = load_chat_setup(broken.str(), (fs::path(broken.str()) / "other.jinja").string(), "mistral");
  EXPECT_EQ(chat->tool_call_parser, "mistral");
}

TEST(ChatPrompt, ToolCallParserFromTheTemplate) {
  EXPECT_EQ(tool_call_parser_of("... <tool_call>\n{{ tool_call | tojson }}</tool_call>"), "hermes");
  EXPECT_EQ(tool_call_parser_of("{{ '[TOOL_CALLS]' }}"), "mistral");
  EXPECT_EQ(tool_call_parser_of("<|start_header_id|>ipython<|end_header_id|>"), "llama3_json");
  EXPECT_EQ(tool_call_parser_of("<|python_tag|>"), "llama3_json");
  EXPECT_EQ(tool_call_parser_of("{{ messages }}"), "");
}

}  // namespace
}  // namespace lmx::plugin
