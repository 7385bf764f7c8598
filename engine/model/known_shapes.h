// Decoder descriptions of well-known model shapes, for benchmarks with random weights.
#pragma once

#include <string>
#include <vector>

#include "engine/model/decoder_desc.h"

namespace lmx {

DecoderDesc known_shape(const std::string& name);  // throws naming the known shapes
std::vector<std::string> known_shape_names();

}  // namespace lmx
