// The device all-reduce (engine/parallel/nccl_communicator.h) on 2+ GPUs, one thread a rank as in
// serving: at every degree up to the GPU count (at most 8), by the one-shot kernel over peer
// memory (small messages, AllReducePath::automatic) and by NCCL, in fp32, fp16 and bf16, every
// rank ends with the exact sum. The inputs are multiples of 1/8 below 2 in magnitude, so every
// partial sum is exact in all three types whatever the order: a wrong, stale or partly summed
// element cannot pass. Sizes cover one 16-byte vector, the decode messages, the one-shot limit and
// just past it (NCCL), and a size that is not a multiple of 16 bytes (NCCL). Three calls go back
// to back on different buffers before any check (a rank that pushes into a receive slot its peer
// has not emptied yet shows here), and the same calls replay from a captured CUDA graph with new
// data each time (the call counts live on the device).
// Needs 2+ GPUs: skips with fewer (fails under LMX_REQUIRE_GPU=1; scripts/gpu_tests.sh runs
// *TensorParallel* tests only where there are 2+).
#include <cuda_runtime_api.h>

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/core/dtype.h"
#include "engine/parallel/communicator.h"
#include "engine/parallel/nccl_communicator.h"
#include "engine/parallel/nccl_library.h"
#include "tests/support/require_gpu.h"

namespace lmx {
namespace {

// Rank r's value at element i of variant v: k / 8 with k in [-15, 15].
float input_value(int rank, size_t i, int variant) {
  return float(int((i * 5 + size_t(rank) * 3 + size_t(variant) * 7) % 31) - 15) / 8.0f;
}

// x (a multiple of 1/8 below 2048 in magnitude: exact in every type here) as bytes of `dtype`.
void encode(float x, DeviceDtype dtype, std::byte* out) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  uint16_t h = 0;
  if (dtype == DeviceDtype::F32) {
    std::memcpy(out, &f, 4);
    return;
  }
  if (dtype == DeviceDtype::BF16) {
    h = uint16_t(f >> 16);
  } else if (x != 0.0f) {  // fp16: rebias the exponent, keep the top 10 mantissa bits (exact)
    const int exponent = int((f >> 23) & 0xff) - 127 + 15;
    h = uint16_t(((f >> 16) & 0x8000) | (uint32_t(exponent) << 10) | ((f >> 13) & 0x3ff));
  }
  std::memcpy(out, &h, 2);
}

float decode(const std::byte* in, DeviceDtype dtype) {
  if (dtype == DeviceDtype::F32) {
    float x;
    std::memcpy(&x, in, 4);
    return x;
  }
  uint16_t h;
  std::memcpy(&h, in, 2);
  return dtype == DeviceDtype::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

std::vector<std::byte> rank_input(int rank, size_t n, int variant, DeviceDtype dtype) {
  const size_t size = device_dtype_bytes(dtype);
  std::vector<std::byte> bytes(n * size);
  for (size_t i = 0; i < n; ++i) encode(input_value(rank, i, variant), dtype, &bytes[i * size]);
  return bytes;
}

// "" when `got` holds the exact sum over `ranks` ranks of variant `variant`, else the first
// wrong element.
std::string check_sum(const std::vector<std::byte>& got, int ranks, int variant,
                      DeviceDtype dtype) {
  const size_t size = device_dtype_bytes(dtype), n = got.size() / size;
  for (size_t i = 0; i < n; ++i) {
    float want = 0;
    for (int r = 0; r < ranks; ++r) want += input_value(r, i, variant);
    const float value = decode(&got[i * size], dtype);
    if (value != want)
      return "element " + std::to_string(i) + " of " + std::to_string(n) + ": " +
             std::to_string(value) + ", want " + std::to_string(want);
  }
  return "";
}

const char* dtype_label(DeviceDtype d) {
  return d == DeviceDtype::F32 ? "fp32" : d == DeviceDtype::F16 ? "fp16" : "bf16";
}

// Element counts to sum for `dtype`.
std::vector<size_t> message_sizes(DeviceDtype dtype) {
  const size_t size = device_dtype_bytes(dtype), limit = kPeerAllReduceMaxBytes / size;
  return {16 / size, 12 / size * 3 /* not a multiple of 16 bytes */, 8192, 32 * 8192, limit,
          limit + 16 / size};
}

#define RANK_CHECK(expr)                                                                 \
  do {                                                                                   \
    const cudaError_t rc_ = (expr);                                                      \
    if (rc_ != cudaSuccess) return std::string(#expr) + ": " + cudaGetErrorString(rc_); \
  } while (0)

// Waits for `stream`; a collective that has not finished after 60 s means a rank is stuck
// waiting for its peers: the test binary ends here rather than hanging.
cudaError_t wait_or_abort(cudaStream_t stream, const std::string& where) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  cudaError_t rc;
  while ((rc = cudaStreamQuery(stream)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "all-reduce stuck for 60 s (%s): aborting the test binary\n",
                   where.c_str());
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return rc;
}

// Sums of n elements of `dtype` on this rank: three eager calls back to back on three buffers,
// then the same three captured in a graph and replayed three times with new inputs. "" when every
// sum was exact, else what was wrong.
std::string sum_and_check(Communicator& host, DeviceCommunicator& comm, cudaStream_t stream,
                          DeviceDtype dtype, size_t n) {
  constexpr int kCalls = 3;
  const size_t bytes = n * device_dtype_bytes(dtype);
  const std::string where = std::string(dtype_label(dtype)) + ", " + std::to_string(bytes) +
                            " bytes, rank " + std::to_string(host.rank());
  struct Buffers {
    std::vector<void*> p = std::vector<void*>(kCalls, nullptr);
    ~Buffers() {
      for (void* b : p) cudaFree(b);
    }
  } buffers;
  for (void*& b : buffers.p) RANK_CHECK(cudaMalloc(&b, bytes));
  // On `stream`: a plain cudaMemcpy from pageable memory may return before its copy lands, and
  // goes on the legacy stream, which this non-blocking stream does not wait for.
  std::vector<std::vector<std::byte>> inputs(kCalls);
  auto upload = [&](int variant_base) {
    for (int c = 0; c < kCalls; ++c) {
      inputs[size_t(c)] = rank_input(host.rank(), n, variant_base + c, dtype);
      cudaMemcpyAsync(buffers.p[size_t(c)], inputs[size_t(c)].data(), bytes,
                      cudaMemcpyHostToDevice, stream);
    }
  };
  auto verify = [&](int variant_base, const char* how) -> std::string {
    if (cudaError_t rc = wait_or_abort(stream, where); rc != cudaSuccess)
      return where + ", " + how + ": " + cudaGetErrorString(rc);
    std::vector<std::byte> got(bytes);
    for (int c = 0; c < kCalls; ++c) {
      cudaMemcpy(got.data(), buffers.p[size_t(c)], bytes, cudaMemcpyDeviceToHost);
      const std::string wrong = check_sum(got, host.size(), variant_base + c, dtype);
      if (!wrong.empty()) return where + ", " + how + ", call " + std::to_string(c) + ": " + wrong;
    }
    return "";
  };
  upload(0);
  for (void* b : buffers.p) comm.all_reduce_sum(b, n, dtype, stream);
  if (std::string wrong = verify(0, "eager"); !wrong.empty()) return wrong;

  cudaGraph_t graph = nullptr;
  RANK_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (void* b : buffers.p) comm.all_reduce_sum(b, n, dtype, stream);
  RANK_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  RANK_CHECK(instantiated);
  std::string wrong;
  for (int replay = 1; replay <= 3 && wrong.empty(); ++replay) {
    upload(replay * kCalls);
    if (cudaError_t rc = cudaGraphLaunch(exec, stream); rc != cudaSuccess)
      wrong = where + ": graph launch: " + cudaGetErrorString(rc);
    else
      wrong = verify(replay * kCalls, "graph replay");
  }
  cudaGraphExecDestroy(exec);
  return wrong;
}

// One rank's part: "" when every sum was exact, else the first thing wrong. The ranks agree
// after each message size, so one that fails stops them all (none is left in a collective).
std::string run_rank(Communicator& host, AllReducePath path) {
  RANK_CHECK(cudaSetDevice(host.rank()));
  auto comm = DeviceCommunicator::create(host, path);
  if (path == AllReducePath::automatic && !comm->one_shot_all_reduce())
    return "the one-shot all-reduce is off on this machine's GPUs (the log says why)";
  cudaStream_t stream = nullptr;
  RANK_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::string failure;
  for (DeviceDtype dtype : {DeviceDtype::F32, DeviceDtype::F16, DeviceDtype::BF16})
    for (size_t n : message_sizes(dtype)) {
      try {
        failure = sum_and_check(host, *comm, stream, dtype, n);
      } catch (const std::exception& e) {
        failure = e.what();
      }
      if (!all_ranks_ok(host, failure.empty())) {
        cudaStreamDestroy(stream);
        return failure.empty() ? "stopped: another rank failed" : failure;
      }
    }
  cudaStreamDestroy(stream);
  return "";
}

TEST(TensorParallelAllReduce, EveryRankGetsTheExactSumEagerAndFromGraphs) {
  const int gpus = cuda_device_count();
  LMX_GPU_SKIP_UNLESS(gpus >= 2, "the device all-reduce needs 2+ GPUs; this machine has " << gpus);
  for (int degree = 2; degree <= std::min(gpus, 8); ++degree)
    for (AllReducePath path : {AllReducePath::automatic, AllReducePath::nccl}) {
      SCOPED_TRACE("degree " + std::to_string(degree) +
                   (path == AllReducePath::nccl ? ", NCCL" : ", one-shot for small messages"));
      auto comms = make_local_communicators(degree);
      std::vector<std::string> failures(static_cast<size_t>(degree));
      std::vector<std::thread> threads;
      for (int r = 0; r < degree; ++r)
        threads.emplace_back([&, r] {
          try {
            failures[size_t(r)] = run_rank(*comms[size_t(r)], path);
          } catch (const std::exception& e) {
            failures[size_t(r)] = e.what();
          }
        });
      for (auto& t : threads) t.join();
      for (const std::string& f : failures) EXPECT_EQ(f, "");
    }
}

// NCCL is opened on demand (engine/parallel/nccl_library.h): in a CUDA build it must open and
// have every function LMX calls. No GPU needed (CI runs it on the CPU machine).
TEST(NcclLibrary, OpensWithEveryFunction) {
  const NcclLibrary& lib = nccl_library();
  int version = 0;
  ASSERT_EQ(lib.GetVersion(&version), ncclSuccess);
  EXPECT_GE(version, 20000) << "an NCCL 2 runtime";
  EXPECT_NE(lib.GetErrorString(ncclInvalidArgument), nullptr);
  for (const void* fn : {(const void*)lib.GetUniqueId, (const void*)lib.CommInitRank,
                         (const void*)lib.CommDestroy, (const void*)lib.AllReduce,
                         (const void*)lib.AllGather})
    EXPECT_NE(fn, nullptr);
}

}  // namespace
}  // namespace lmx
