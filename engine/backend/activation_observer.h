// A seam for calibration (smoothquant/calibration.h, smoothquant/kv_calibration.h): a backend
// given an observer shows it, after each forward, a summary of the input of every decoder
// projection and of the K/V each layer cached. The backend summarizes on its own device (the CUDA
// backend reduces on the GPU and copies kilobytes, not the activations), so the summary is what
// calibration needs and no more: each input column's max |x| and the leading rows the observer
// asks for. Null observer (the default): no cost. Observers must not keep the pointers.
#pragma once

namespace lmx {

enum class LinearSlot { Qkv, O, Up, Down };
inline constexpr int kLinearSlots = 4;

// One projection input x [rows, in] of one forward, summarized; fp32, host memory.
struct InputSummary {
  int rows = 0;                    // the forward's tokens
  int in = 0;                      // input columns (this rank's under tensor parallelism)
  const float* abs_max = nullptr;  // [in]: max over the rows of |x[t, j]|; NaN if any was NaN
  const float* head = nullptr;     // [head_rows, in]: x's first rows, as the backend computed them
  int head_rows = 0;               // min(rows, rows_wanted(...)) at the forward's start
};

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // How many leading rows of layer `layer`'s `slot` input the next forward should hand over
  // whole (InputSummary::head); asked once per forward, before it runs.
  virtual int rows_wanted(int /*layer*/, LinearSlot /*slot*/) const { return 0; }
  // The input of layer `layer`'s projection `slot` in the forward that just ran.
  virtual void observe(int layer, LinearSlot slot, const InputSummary& x) = 0;
  // max |K| (after rotary) and max |V| that layer `layer` wrote to its KV cache in the forward
  // (this rank's kv heads); NaN if any value was NaN, infinite if any was.
  virtual void observe_kv(int /*layer*/, float /*k_abs_max*/, float /*v_abs_max*/) {}
};

}  // namespace lmx
