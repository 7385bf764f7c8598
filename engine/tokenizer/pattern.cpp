#include "engine/tokenizer/pattern.h"

#include "engine/core/error.h"

namespace lmx::tok {

Pattern::Pattern(const nlohmann::json& j, std::string_view owner) {
  if (j.is_object() && j.contains("String")) {
    literal_ = j.at("String").get<std::string>();
  } else if (j.is_object() && j.contains("Regex")) {
    regex_ = std::make_unique<Regex>(j.at("Regex").get<std::string>());
  } else {
    throw_error("tokenizer: {} pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}, got {}",
                owner, j.dump());
  }
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view s) const {
  if (regex_) return regex_->find_all(s);
  std::vector<std::pair<size_t, size_t>> out;
  if (literal_.empty()) return out;
  for (size_t p = s.find(literal_); p != std::string_view::npos; p = s.find(literal_, p)) {
    out.emplace_back(p, p + literal_.size());
    p += literal_.size();
  }
  return out;
}

std::string Pattern::replace_all(std::string_view s, std::string_view content) const {
  std::string out;
  size_t last = 0;
  for (const auto& [b, e] : find_all(s)) {
    out.append(s.substr(last, b - last));
    out.append(content);
    last = e;
  }
  out.append(s.substr(last));
  return out;
}

}  // namespace lmx::tok
