#include "engine/backend/alibi.h"

#include <cmath>

#include "engine/core/error.h"

namespace lmx {

std::vector<float> alibi_slopes(int heads) {
  if (heads <= 0) throw_error("ALiBi needs a positive head count, got {}", heads);
  int p = 1;
  while (p * 2 <= heads) p *= 2;
  // base = 2^(-(2^-(log2(p) - 3))) = 2^(-8 / p), rounded to fp32 like the reference's tensor.
  const float base = float(std::exp2(-8.0 / p));
  const float extra_base = float(std::exp2(-4.0 / p));  // the same rule for 2p
  std::vector<float> slopes;
  for (int i = 1; i <= p; ++i) slopes.push_back(std::pow(base, float(i)));
  for (int i = 1; int(slopes.size()) < heads; i += 2) slopes.push_back(std::pow(extra_base, float(i)));
  return slopes;
}

}  // namespace lmx
