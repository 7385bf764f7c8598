// Well-known model shapes for benchmarks with random weights: the real config.json of each (the
// fields that shape the math), read by its family's own describe() like any checkpoint's.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/decoder_desc.h"

namespace lmx {

nlohmann::json known_shape_config(const std::string& name);  // throws naming the known shapes
DecoderDesc known_shape(const std::string& name);
std::vector<std::string> known_shape_names();

}  // namespace lmx
