// One projection's parameters as the GEMM kernels take them:
//   y[M, out] = x[M, in] · weight^T (+ bias).
// weight: [out, in] row-major (nn.Linear); bias: [out] or null; host memory for the CPU kernels,
// device memory for the CUDA ones. The model-level Linear (engine/model/linear.h) hands its kernels
// this view; quantized storage will add its scales here.
#pragma once

namespace lmx::kernels {

template <typename T>
struct LinearWeights {
  const T* weight = nullptr;
  const T* bias = nullptr;
  int out = 0, in = 0;
  LinearWeights without_bias() const { return {weight, nullptr, out, in}; }
};

}  // namespace lmx::kernels
