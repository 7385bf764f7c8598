#include "quant_flags.h"

#include <climits>

#include "engine/core/error.h"
#include "engine/model/quantization.h"

namespace lmx::cli {

LinearQuant quant_from_args(const Args& args) {
  const std::string method = args.get(kQuantizeFlag).value_or("none");
  const auto group = args.get_int(kQuantizeGroupFlag);
  if (method == "none") {
    if (group) throw_error("{} applies to {} dynamic_int8", kQuantizeGroupFlag, kQuantizeFlag);
    return {};
  }
  if (method != "dynamic_int8")
    throw_error("{} must be dynamic_int8 or none, got '{}'", kQuantizeFlag, method);
  if (group && (*group < 1 || *group > INT_MAX))
    throw_error("{} {} is out of range", kQuantizeGroupFlag, *group);
  return dynamic_int8(group ? std::optional<int>(int(*group)) : std::nullopt);
}

}  // namespace lmx::cli
