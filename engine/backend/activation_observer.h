// A seam for smoothquant's calibration (smoothquant/calibration.h): a backend given an observer
// shows it the input of every decoder projection before computing it. Null (the default): no
// cost. The CPU backend implements it; observers must not keep the pointers.
#pragma once

namespace lmx {

enum class LinearSlot { Qkv, O, Up, Down };
inline constexpr int kLinearSlots = 4;

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // x [rows, in] fp32, host memory: the input of layer `layer`'s projection `slot` (this rank's
  // columns under tensor parallelism), rows = the forward's tokens.
  virtual void observe(int layer, LinearSlot slot, const float* x, int rows, int in) = 0;
};

}  // namespace lmx
