// ALiBi slopes (Press et al.; Bloom), one per attention head, computed in fp32 as transformers'
// build_alibi_tensor does: for the largest power of two p <= heads, slope i = b^(i + 1) with
// b = 2^(-8 / p); heads beyond p take the odd powers of 2^(-4 / p). The attention kernels add
// slope * (key position - query position) to each scaled score (kernels/attention.h).
#pragma once

#include <vector>

namespace lmx {

std::vector<float> alibi_slopes(int heads);  // [heads]

}  // namespace lmx
