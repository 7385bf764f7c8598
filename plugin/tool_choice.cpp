#include "plugin/tool_choice.h"

#include <set>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "plugin/json_bounds.h"

namespace lmx::plugin {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// How a format writes one call around its JSON: text before "{", the arguments' key, text after
// the call object.
struct CallFormat {
  const char* before;
  const char* arguments_key;
  const char* after;
};

CallFormat call_format(const std::string& parser) {
  if (parser == "hermes") return {"<tool_call>\n", "arguments", "\n</tool_call>"};
  if (parser == "llama3_json") return {"", "parameters", ""};
  if (parser == "mistral") return {"[TOOL_CALLS][", "arguments", "]"};
  throw_field_error("tool_choice",
                    fmt::format("forcing a tool call needs the model's tool-call format, and "
                                "{} has none (set option.tool_call_parser to hermes, "
                                "llama3_json or mistral)",
                                parser.empty() ? "its chat template names" : "'" + parser + "'"));
}

// The function object of tools[i], checked.
const ordered_json& function_of(const ordered_json& tools, size_t i) {
  const std::string field = fmt::format("tools[{}].function", i);
  const ordered_json& t = tools[i];
  if (!t.is_object() || !t.contains("function") || !t["function"].is_object())
    throw_field_error(field, "must be an object");
  const ordered_json& f = t["function"];
  if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
    throw_field_error(field + ".name", "must be a non-empty string");
  return f;
}

std::shared_ptr<const JsonSchema> arguments_schema(const ordered_json& function, size_t i) {
  const ordered_json params = function.value("parameters", ordered_json(nullptr));
  return JsonSchema::compile(params.is_null() ? json::object() : json::parse(params.dump()),
                             fmt::format("tools[{}].function.parameters", i), kJsonObject);
}

}  // namespace

std::shared_ptr<const JsonGrammar> tool_choice_grammar(const std::string& parser,
                                                       const ordered_json& tools,
                                                       const ordered_json& tool_choice) {
  if (tool_choice.is_null() || tool_choice == "auto" || tool_choice == "none") return nullptr;
  std::string name;
  if (tool_choice.is_object()) {
    if (tool_choice.value("type", "function") != "function")
      throw_field_error("tool_choice.type", "must be \"function\"");
    auto f = tool_choice.find("function");
    if (f == tool_choice.end() || !f->is_object() || !f->contains("name") ||
        !(*f)["name"].is_string())
      throw_field_error("tool_choice.function.name", "must be a string");
    name = (*f)["name"].get<std::string>();
  } else if (tool_choice != "required") {
    throw_field_error("tool_choice",
                      "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                      "\"function\": {\"name\": ...}}");
  }
  if (!tools.is_array() || tools.empty())
    throw_field_error("tool_choice",
                      fmt::format("{} needs a non-empty \"tools\" list",
                                  name.empty() ? "\"required\"" : "a named function"));
  const CallFormat format = call_format(parser);
  // One branch per tool (or only the named one): its prefix names it, its schema is its
  // arguments'.
  const auto prefix_of = [&](const std::string& tool) {
    return fmt::format("{}{{\"name\": {}, \"{}\": ", format.before, json(tool).dump(),
                       format.arguments_key);
  };
  const std::string suffix = fmt::format("}}{}", format.after);
  std::vector<JsonGrammar::Branch> branches;
  std::set<std::string> seen;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string tool = function_of(tools, i)["name"].get<std::string>();
    if (!seen.insert(tool).second)
      throw_field_error(fmt::format("tools[{}].function.name", i),
                        fmt::format("two tools are named {}", json_bounds::quote(json(tool))));
    if (name.empty() || tool == name)
      branches.push_back({prefix_of(tool), arguments_schema(function_of(tools, i), i)});
  }
  if (branches.empty())
    throw_field_error(
        "tool_choice.function.name",
        fmt::format("no tool named {} among the request's tools", json_bounds::quote(json(name))));
  if (branches.size() == 1)
    return std::make_shared<const JsonGrammar>(
        JsonGrammar{branches[0].prefix, branches[0].schema, suffix});
  return std::make_shared<const JsonGrammar>(JsonGrammar::one_of(std::move(branches), suffix));
}

}  // namespace lmx::plugin
