// A token id read from a tokenizer file: an integer in [0, 2^31), else an lmx::Error naming where
// (nlohmann's get<int32_t>() of 5e21 or -1.5 is undefined behaviour or silently wrong).
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace lmx::tok {

inline int32_t token_id(const nlohmann::json& v, std::string_view what) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(INT32_MAX)) return int32_t(v.get<uint64_t>());
  if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX)
    return int32_t(v.get<int64_t>());
  std::string shown = v.dump();
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  throw_error("tokenizer: {} must be a token id (an integer from 0 to {}), got {}", what, INT32_MAX,
              shown);
}

}  // namespace lmx::tok
