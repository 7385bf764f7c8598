// --quantize none|dynamic_int8 [--quantize-group-size N]: the weight quantization a command loads
// the model with (engine/model/quantization.h, docs/quantization.md).
#pragma once

#include "args.h"
#include "engine/model/linear.h"

namespace lmx::cli {

inline constexpr const char* kQuantizeFlag = "--quantize";
inline constexpr const char* kQuantizeGroupFlag = "--quantize-group-size";

// None without --quantize; dynamic_int8 per channel, or grouped with --quantize-group-size.
// Throws lmx::Error naming the flag for an unknown method, a group size that is not allowed, or
// a group size without --quantize dynamic_int8.
LinearQuant quant_from_args(const Args& args);

}  // namespace lmx::cli
