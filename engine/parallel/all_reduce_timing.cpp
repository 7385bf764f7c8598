#include "engine/parallel/all_reduce_timing.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <exception>
#include <thread>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"
#include "engine/parallel/communicator.h"

namespace lmx {
namespace {

// One rank's part: its GPU, its NCCL communicator, one buffer as large as the largest message.
// Rank 0 fills `out`.
void time_rank(Communicator& host, std::span<const size_t> elements, DeviceDtype dtype,
               int iterations, AllReducePath path, std::vector<AllReduceTiming>* out) {
  LMX_CUDA_CHECK(cudaSetDevice(host.rank()));
  auto comm = DeviceCommunicator::create(host, path);
  const size_t largest = *std::max_element(elements.begin(), elements.end());
  void* buffer = nullptr;
  LMX_CUDA_CHECK(cudaMalloc(&buffer, largest * device_dtype_bytes(dtype)));
  LMX_CUDA_CHECK(cudaMemset(buffer, 0, largest * device_dtype_bytes(dtype)));
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  LMX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  LMX_CUDA_CHECK(cudaEventCreate(&start));
  LMX_CUDA_CHECK(cudaEventCreate(&stop));
  const int n = host.size();
  for (size_t count : elements) {
    for (int i = 0; i < 5; ++i) comm->all_reduce_sum(buffer, count, dtype, stream);
    LMX_CUDA_CHECK(cudaStreamSynchronize(stream));
    float barrier = 0;
    host.all_reduce_sum(&barrier, 1);  // every rank starts its timed calls together
    LMX_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < iterations; ++i) comm->all_reduce_sum(buffer, count, dtype, stream);
    LMX_CUDA_CHECK(cudaEventRecord(stop, stream));
    LMX_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    LMX_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (out) {
      AllReduceTiming t;
      t.bytes = count * device_dtype_bytes(dtype);
      t.us_per_call = 1e3 * double(ms) / iterations;
      t.bus_gbps = double(t.bytes) / (t.us_per_call * 1e3) * 2.0 * (n - 1) / n;
      out->push_back(t);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  cudaFree(buffer);
}

}  // namespace

std::vector<AllReduceTiming> time_all_reduce(int degree, std::span<const size_t> elements,
                                             DeviceDtype dtype, int iterations,
                                             AllReducePath path) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  if (degree < 2 || degree > gpus)
    throw_error("timing an all-reduce over {} GPUs needs 2..{} (the GPUs of this machine)", degree,
                gpus);
  if (elements.empty() || iterations < 1) throw_error("internal: nothing to time");
  auto comms = make_local_communicators(degree);
  std::vector<AllReduceTiming> result;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(degree));
  std::vector<std::thread> threads;
  for (int r = 0; r < degree; ++r)
    threads.emplace_back([&, r] {
      try {
        time_rank(*comms[size_t(r)], elements, dtype, iterations, path,
                  r == 0 ? &result : nullptr);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return result;
}

}  // namespace lmx
