// Rotary inverse frequencies of a model, with its scaling (linear, llama3) folded in, computed in
// fp32 the way Hugging Face's rotary embedding classes do.
#pragma once

#include <vector>

#include "engine/model/decoder_desc.h"

namespace lmx {

std::vector<float> rope_inv_freq(const RopeDesc& rope);  // [rotary_dim / 2]

}  // namespace lmx
