// Host-side timing of enqueued GPU work with CUDA events, for the GEMMs that pick their algorithm
// by measurement (kernels/cuda/gemm.cu, kernels/cuda/w8a8.cu).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>

namespace lmx::kernels::cuda::detail {

// Mean time in microseconds of one call of `call(i)` (i: which operands, 0..count-1) on `stream`:
// one warm-up round over every i, then `rounds` rounds; a negative time when a call returned
// false. Synchronizes the stream.
template <typename Call>
double mean_call_us(Call&& call, int count, int rounds, cudaStream_t stream) {
  for (int i = 0; i < count; ++i)
    if (!call(i)) return -1.0;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess)
    throw std::runtime_error("GEMM tuning: cannot create CUDA events");
  bool ok = cudaEventRecord(start, stream) == cudaSuccess;
  for (int r = 0; ok && r < rounds; ++r)
    for (int i = 0; ok && i < count; ++i) ok = call(i);
  ok = ok && cudaEventRecord(stop, stream) == cudaSuccess &&
       cudaEventSynchronize(stop) == cudaSuccess;
  float ms = 0.0f;
  ok = ok && cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ok ? 1e3 * ms / (rounds * count) : -1.0;
}

}  // namespace lmx::kernels::cuda::detail
