#include "engine/backend/smoothing_scorer.h"

#include <tuple>

#include "engine/core/error.h"

namespace lmx {

void ScorerRows::set(size_t values, int rows, int in) {
  if (rows < 1 || in < 1 || values != size_t(rows) * size_t(in))
    throw_error("alpha search: {} values for {} rows of {} columns", values, rows, in);
  rows_ = rows;
  in_ = in;
  ++set_;
}

void ScorerRows::check_score(int layer, LinearSlot slot, int in, size_t factors) const {
  if (rows_ == 0) throw_error("alpha search: no calibration rows set");
  if (in_ != in || factors != size_t(in))
    throw_error("alpha search: layer {} projection {} has {} inputs; rows of {}, {} factors", layer,
                int(slot), in, in_, factors);
}

bool ScorerRows::reference_stale(int layer, LinearSlot slot) {
  if (std::tie(ref_layer_, ref_slot_, ref_set_) == std::tie(layer, slot, set_)) return false;
  std::tie(ref_layer_, ref_slot_, ref_set_) = std::tie(layer, slot, set_);
  return true;
}

}  // namespace lmx
