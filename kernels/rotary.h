// Rotary position embedding, Hugging Face's "rotate half" convention, applied in place to the
// first `rotary_dim` dims of every head (partial rotary leaves the rest untouched):
//   x'[i]       = x[i] * cos(p * f[i]) - x[i + r/2] * sin(p * f[i])
//   x'[i + r/2] = x[i + r/2] * cos(p * f[i]) + x[i] * sin(p * f[i])      i < r/2, r = rotary_dim
// x: [tokens, row_stride] with `heads` heads of `head_dim` starting at column 0 of each row.
// positions: [tokens]; inv_freq: [rotary_dim / 2] (scaling already folded in). CPU: fp32, host.
#pragma once

#include <cstdint>

namespace lmx::kernels::cpu {

void rotary(float* x, int row_stride, const int32_t* positions, const float* inv_freq, int tokens,
            int heads, int head_dim, int rotary_dim);

}  // namespace lmx::kernels::cpu
