// A seam for calibration (smoothquant/calibration.h, smoothquant/kv_calibration.h): a backend
// given an observer shows it the input of every decoder projection before computing it, and the
// K/V it caches. Null (the default): no
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
  // k, v: [rows, stride] fp32, host, width values a row at column 0 (this rank's kv heads): the
  // K (after rotary) and V that layer `layer` is about to write to its KV cache. The fp8 cache's
  // calibration (smoothquant/kv_calibration.h) records their max |value|.
  virtual void observe_kv(int /*layer*/, const float* /*k*/, const float* /*v*/, int /*rows*/,
                          int /*width*/, int /*stride*/) {}
};

}  // namespace lmx
