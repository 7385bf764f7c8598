#include "engine/tokenizer/post_processors.h"

#include "engine/core/error.h"
#include "engine/tokenizer/json_ids.h"

namespace lmx::tok {
namespace {

// Wraps the sequence: before + ids + after.
class Wrap final : public PostProcessor {
 public:
  Wrap(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& p : parts_) p->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

// TemplateProcessing's single template: SpecialToken items around the one Sequence item.
std::unique_ptr<PostProcessor> make_template(const nlohmann::json& j) {
  const auto& specials = j.at("special_tokens");
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const auto& item : j.at("single")) {
    if (item.contains("Sequence")) {
      if (item.at("Sequence").value("id", "A") != "A")
        throw_error("tokenizer: TemplateProcessing single template uses sequence B");
      seen_sequence = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    if (!specials.contains(name))
      throw_error("tokenizer: TemplateProcessing special token '{}' has no ids", name);
    auto& dst = seen_sequence ? after : before;
    for (const auto& id : specials.at(name).at("ids")) dst.push_back(tok::token_id(id, "a special token's id"));
  }
  return std::make_unique<Wrap>(std::move(before), std::move(after));
}

int32_t pair_id(const nlohmann::json& j, const char* key) {
  return tok::token_id(j.at(key).at(1), key);
}

}  // namespace

std::unique_ptr<PostProcessor> make_bos_eos_processor(std::vector<int32_t> before,
                                                      std::vector<int32_t> after) {
  return std::make_unique<Wrap>(std::move(before), std::move(after));
}

std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "TemplateProcessing") return make_template(j);
  if (type == "BertProcessing" || type == "RobertaProcessing")
    return std::make_unique<Wrap>(std::vector<int32_t>{pair_id(j, "cls")},
                                  std::vector<int32_t>{pair_id(j, "sep")});
  if (type == "ByteLevel")
    return std::make_unique<Wrap>(std::vector<int32_t>{}, std::vector<int32_t>{});
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const auto& p : j.at("processors"))
      if (auto made = make_post_processor(p)) parts.push_back(std::move(made));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw_error("tokenizer: unsupported post_processor type '{}'", type.empty() ? j.dump() : type);
}

}  // namespace lmx::tok
