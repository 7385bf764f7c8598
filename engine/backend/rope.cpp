#include "engine/backend/rope.h"

#include <cmath>
#include <numbers>

namespace lmx {

std::vector<float> rope_inv_freq(const RopeDesc& rope) {
  const int half = rope.rotary_dim / 2;
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i)
    inv[i] = 1.0f / std::pow(rope.theta, float(2 * i) / float(rope.rotary_dim));

  switch (rope.scaling) {
    case RopeScalingKind::None:
      break;
    case RopeScalingKind::Linear:
      for (float& f : inv) f /= rope.factor;
      break;
    case RopeScalingKind::Llama3: {
      const float old_len = float(rope.original_max_position);
      const float low_wavelen = old_len / rope.low_freq_factor;
      const float high_wavelen = old_len / rope.high_freq_factor;
      for (float& f : inv) {
        const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
        if (wavelen > low_wavelen) {
          f /= rope.factor;  // low frequencies: fully scaled
        } else if (wavelen >= high_wavelen) {  // medium: interpolate
          const float smooth = (old_len / wavelen - rope.low_freq_factor) /
                               (rope.high_freq_factor - rope.low_freq_factor);
          f = (1.0f - smooth) * f / rope.factor + smooth * f;
        }
      }
      break;
    }
  }
  return inv;
}

}  // namespace lmx
