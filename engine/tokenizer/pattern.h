// The `pattern` field shared by Replace (normalizer and decoder) and Split: either
// {"String": "literal"} or {"Regex": "pcre"}.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/regex.h"

namespace lmx::tok {

class Pattern {
 public:
  Pattern(const nlohmann::json& j, std::string_view owner);  // owner names the component in errors
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;
  std::string replace_all(std::string_view s, std::string_view content) const;

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
};

}  // namespace lmx::tok
