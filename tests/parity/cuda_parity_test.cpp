// The CUDA backend against Hugging Face's fixtures and against the CPU reference.
//  - fp32: greedy ids equal HF's exactly; logits at the last prompt position and at the first 4
//    decode steps within 1e-4 of max |logit|.
//  - fp16 / bf16, teacher-forced along HF's greedy path: top-1 equals HF's token on every step
//    whose reference margin exceeds 0.1 (fp16) / 0.3 (bf16) logits, and the logits' relative L2
//    error against the CPU fp32 backend within 2e-2 / 1e-1 (weights and activations rounded to
//    11 / 8 significant bits through a few layers of N(0, 0.2) weights and biases, which amplify
//    it; the worst seen on an H100 was 9.5e-2 in bf16, on the bias-heavy Qwen2 fixtures). Top-1 on
//    clear steps is the decisive check.
//  - Decode of a batch of 3 in fp16 / bf16 from CUDA graphs (decode-sized projections through the
//    skinny GEMV) on the kernel-injection path against the generic path and the CPU
//    (HalfPrecisionBatchedDecodeInGraphs).
//  - A Llama shape with head_dim 64 and 128 (the tuned attention kernels) vs the CPU backend on
//    a checkpoint written by the test.
// Skips with a message on machines without a GPU (CI); runs on the device (scripts/gpu_tests.sh).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/backend/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/core/error.h"
#include "engine/generate/generator.h"
#include "engine/model/model.h"
#include "engine/model/quantization.h"
#include "engine/model/shard.h"
#include "kernels/sampling.h"
#include "smoothquant/calibration.h"
#include "smoothquant/plan.h"
#include "smoothquant/smoothquant.h"
#include "tests/support/checkpoint_writer.h"
#include "tests/support/fp8_checkpoint_writer.h"
#include "tests/support/parity_fixtures.h"
#include "tests/support/splitting_degrees.h"
#include "tests/support/require_gpu.h"

namespace lmx {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Skips without a GPU; fails instead under LMX_REQUIRE_GPU=1 (scripts/gpu_tests.sh sets it).
#define REQUIRE_GPU()                          \
  LMX_GPU_SKIP_UNLESS(cuda_device_available(), \
                      "no CUDA GPU on this machine: run scripts/gpu_tests.sh on the device")

using testing::open_parity_fixture;
using testing::parity_fixture_names;

CudaBackendOptions options(CudaDtype dtype) {
  CudaBackendOptions o;
  o.dtype = dtype;
  o.kv_blocks = 256;
  o.max_step_tokens = 512;
  o.max_sequences = 16;
  return o;
}

// ||a - ref|| / ||ref||
double rel_l2(std::span<const float> a, std::span<const float> ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += double(a[i] - ref[i]) * (a[i] - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

// Logits at every step along `path` after `prompt` (teacher forcing), one row per generated token.
std::vector<std::vector<float>> forced_logits(Backend& b, const std::vector<int32_t>& prompt,
                                              const std::vector<int32_t>& path) {
  std::vector<int32_t> blocks;
  const int needed = int(prompt.size() + path.size());
  for (int i = 0; i * b.kv_shape().block_size < needed; ++i) blocks.push_back(i);
  std::vector<std::vector<float>> rows;
  std::vector<float> logits;
  BatchChunk c{prompt, 0, blocks, true};
  b.forward(std::span(&c, 1), logits);
  rows.push_back(logits);
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    BatchChunk d{std::span(&path[i], 1), int(prompt.size() + i), blocks, true};
    b.forward(std::span(&d, 1), logits);
    rows.push_back(logits);
  }
  return rows;
}

// Teacher-forced decode of several sequences as one batch: the prompts prefilled in one step (one
// chunk each), then one decode step a token of the paths with every sequence in it (replayed from
// a CUDA graph when the backend has graphs on). Returns [step][sequence] logits rows.
std::vector<std::vector<std::vector<float>>> forced_batch_logits(
    Backend& b, const std::vector<std::vector<int32_t>>& prompts,
    const std::vector<std::vector<int32_t>>& paths, int steps) {
  const size_t S = prompts.size();
  const int V = b.desc().vocab_size;
  std::vector<std::vector<int32_t>> blocks(S);
  int next_block = 0;
  for (size_t s = 0; s < S; ++s)
    for (int i = 0; i * b.kv_shape().block_size < int(prompts[s].size()) + steps; ++i)
      blocks[s].push_back(next_block++);
  std::vector<std::vector<std::vector<float>>> out;
  std::vector<float> logits;
  auto step = [&](const std::vector<BatchChunk>& chunks) {
    b.forward(chunks, logits);
    auto& rows = out.emplace_back();
    for (size_t s = 0; s < S; ++s)
      rows.emplace_back(logits.begin() + long(s) * V, logits.begin() + long(s + 1) * V);
  };
  std::vector<BatchChunk> chunks;
  for (size_t s = 0; s < S; ++s) chunks.push_back({prompts[s], 0, blocks[s], true});
  step(chunks);
  for (int i = 0; i + 1 < steps; ++i) {
    chunks.clear();
    for (size_t s = 0; s < S; ++s)
      chunks.push_back(
          {std::span(&paths[s][size_t(i)], 1), int(prompts[s].size()) + i, blocks[s], true});
    step(chunks);
  }
  return out;
}

// Half-precision runs: (dtype, reference margin of a "clear" step, relative L2 tolerance against
// the CPU fp32 backend). GPT-Neo does not scale its attention scores by head_dim^-0.5, so the
// rounding of q and k moves its scores sqrt(head_dim) times as much: on the H100 (2026-11-25) its
// bf16 logits reached 0.121 on the kernel-injection and 0.120 on the generic path (the same error
// on both, so not a path's bug); its bf16 bound is 1.5x the others'.
struct HalfPrecision {
  CudaDtype dtype;
  double margin, tol;
};
std::vector<HalfPrecision> half_precisions(const DecoderDesc& d) {
  return {{CudaDtype::F16, 0.1, 2e-2}, {CudaDtype::BF16, 0.3, d.scale_attention ? 1e-1 : 1.5e-1}};
}

class CudaHfParity : public ::testing::TestWithParam<std::string> {};

// Every case of the fixture through `backend` in fp32: greedy ids equal transformers', logits at
// the last prompt position and the first decode steps within 1e-4 of max |logit|.
void expect_fp32_cases(Backend& backend, const json& expected) {
  for (const json& c : expected["cases"]) {
    GenerationRequest r;
    r.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    r.params.max_new_tokens = int(c["greedy_ids"].size());
    r.params.ignore_eos = true;
    r.params.return_prompt_logits = true;
    r.params.return_step_logits = testing::step_logits(c);
    Generator gen(backend);
    const auto result = gen.generate(std::span(&r, 1)).front();
    SCOPED_TRACE("prompt length " + std::to_string(r.prompt.size()));
    EXPECT_EQ(result.tokens, c["greedy_ids"].get<std::vector<int32_t>>());
    testing::expect_case_logits_near(result, c, 1e-4);
  }
}

TEST_P(CudaHfParity, Fp32GreedyIdsAndLogits) {
  REQUIRE_GPU();
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  expect_fp32_cases(*make_cuda_backend(model, options(CudaDtype::F32)), f.expected);
}

// Every case of the fixture teacher-forced through `backend` in a half precision: logits within
// `tol` relative L2 of the CPU fp32 backend's, top-1 equal to transformers' token on every step
// whose reference margin exceeds `margin`. Returns the number of such clear steps.
int expect_half_precision_cases(Backend& backend, Backend& cpu, const json& expected,
                                const HalfPrecision& half) {
  int clear_steps = 0;
  double worst = 0;
  for (const json& c : expected["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto path = c["greedy_ids"].get<std::vector<int32_t>>();
    const auto margins = c["step_margins"].get<std::vector<double>>();
    const auto gpu_rows = forced_logits(backend, prompt, path);
    const auto cpu_rows = forced_logits(cpu, prompt, path);
    for (size_t s = 0; s < path.size(); ++s) {
      const auto& g = gpu_rows[s];
      const double e = rel_l2(g, cpu_rows[s]);
      worst = std::max(worst, e);
      EXPECT_LE(e, half.tol) << "step " << s << " dtype " << int(half.dtype);
      if (margins[s] <= half.margin) continue;
      ++clear_steps;
      const int32_t top = int32_t(std::max_element(g.begin(), g.end()) - g.begin());
      EXPECT_EQ(top, path[s]) << "step " << s << " margin " << margins[s] << " dtype " << int(half.dtype);
    }
  }
  // The measured worst, to hold the tolerance to the data (it is a relative L2 of the whole
  // logits row; bf16's 8x larger unit roundoff than fp16's scales fp16's 2e-2 to 0.16).
  std::printf("[ accuracy ] dtype %d: worst relative L2 vs CPU fp32 %.4g (bound %.3g)\n",
              int(half.dtype), worst, half.tol);
  return clear_steps;
}

TEST_P(CudaHfParity, HalfPrecisionTopOneOnClearSteps) {
  REQUIRE_GPU();
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  for (const HalfPrecision& half : half_precisions(model.desc)) {
    auto backend = make_cuda_backend(model, options(half.dtype));
    auto cpu = make_cpu_backend(model, {16, 256});
    EXPECT_GT(expect_half_precision_cases(*backend, *cpu, f.expected, half), 10);
  }
}

// Decode steps replayed from CUDA graphs (padded to a batch bucket) give the eager steps' tokens,
// for a ragged batch of 3 (bucket 4: one padding row) on the fused and the generic path.
TEST_P(CudaHfParity, GraphsMatchEagerInABatch) {
  REQUIRE_GPU();
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  std::vector<GenerationRequest> requests;
  for (const json& c : f.expected["cases"]) {
    GenerationRequest r;
    r.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    r.params.max_new_tokens = int(c["greedy_ids"].size());
    r.params.ignore_eos = true;
    requests.push_back(r);
  }
  for (bool fused : {true, false}) {
    CudaBackendOptions eager = options(CudaDtype::F32), graphs = eager;
    eager.fused = graphs.fused = fused;
    graphs.cuda_graphs = true;
    auto a = make_cuda_backend(model, eager);
    auto b = make_cuda_backend(model, graphs);
    const auto ra = Generator(*a).generate(requests);
    const auto rb = Generator(*b).generate(requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(ra[i].tokens, rb[i].tokens) << "request " << i << " fused " << fused;
      EXPECT_EQ(ra[i].tokens, f.expected["cases"][i]["greedy_ids"].get<std::vector<int32_t>>())
          << "request " << i << " fused " << fused;
    }
  }
}

// Decode of a batch of 3 sequences (graph bucket 4: one padding row) in fp16 and bf16, replayed
// from CUDA graphs; at <= 8 tokens a step's projections run the tensor-core skinny GEMV. Checked
// along HF's greedy paths (teacher forcing), three CUDA paths against each other and the CPU:
//  - kernel injection with the decode projections unfused against the generic path (fused =
//    false: residual adds and biases as their own kernels, same graphs, same projections and
//    attention): models without biases compute the same values (the fused add + norm rounds the
//    sum to T exactly as the separate add does), so 1e-3 / 5e-3 relative L2 (fp16 / bf16); with
//    biases the generic path also rounds the biased projections to T where the fused path does
//    not, so half the CPU tolerance (1e-2 / 5e-2);
//  - kernel injection as shipped (norms folded into the projections, adds and activation in their
//    epilogues): a different rounding (the folded weights are rounded to T, the normalized input
//    is not), so it is held to the CPU instead: within the tolerances of
//    HalfPrecisionTopOneOnClearSteps (2e-2 / 1e-1), about as accurate overall as the generic
//    path, and top-1 equal to HF's token on clear steps. "About as accurate": the root sum of
//    squares of the relative errors at most 1.5x the generic path's. The folded weights are one
//    fixed perturbation of the model, so a fixture gives one draw of it: on the H100 (2026-11-22)
//    the ratio ranged 0.80-1.10 in fp16 and 0.80-1.42 (real_stories260k) in bf16 over the
//    fixtures; a wrong scale, rotation or residual is off by far more.
TEST_P(CudaHfParity, HalfPrecisionBatchedDecodeInGraphs) {
  REQUIRE_GPU();
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  const DecoderDesc& desc = model.desc;
  const bool biases = desc.qkv_bias || desc.o_bias || desc.mlp_bias;
  std::vector<std::vector<int32_t>> prompts, paths;
  std::vector<std::vector<double>> margins;
  int steps = 1 << 30;
  for (const json& c : f.expected["cases"]) {
    prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
    paths.push_back(c["greedy_ids"].get<std::vector<int32_t>>());
    margins.push_back(c["step_margins"].get<std::vector<double>>());
    steps = std::min(steps, int(paths.back().size()));
  }
  ASSERT_GE(prompts.size(), 2u);
  ASSERT_LE(prompts.size(), 8u);
  auto cpu = make_cpu_backend(model, {16, 256});
  const auto ref = forced_batch_logits(*cpu, prompts, paths, steps);
  for (auto [dtype, margin, tol] : half_precisions(desc)) {
    CudaBackendOptions shipped_opts = options(dtype);
    shipped_opts.cuda_graphs = true;
    // The two paths compared with each other use cuBLAS's default algorithms: tuning picks one
    // by timing, so two backends may sum a projection in different orders (real_stories260k's
    // cuBLAS down projection, K = 172: 1.9e-3 apart in fp16 on the H100, 2026-11-25).
    CudaBackendOptions unfused_decode_opts = shipped_opts;
    unfused_decode_opts.fuse_decode_projections = false;
    unfused_decode_opts.tune_gemms = false;
    CudaBackendOptions generic_opts = unfused_decode_opts;
    generic_opts.fused = false;
    const auto shipped = forced_batch_logits(*make_cuda_backend(model, shipped_opts), prompts,
                                             paths, steps);
    const auto unfused = forced_batch_logits(*make_cuda_backend(model, unfused_decode_opts),
                                             prompts, paths, steps);
    const auto generic = forced_batch_logits(*make_cuda_backend(model, generic_opts), prompts,
                                             paths, steps);
    const double path_tol = biases ? tol / 2 : (dtype == CudaDtype::F16 ? 1e-3 : 5e-3);
    int clear_steps = 0;
    double shipped_sq = 0, generic_sq = 0;
    for (int i = 0; i < steps; ++i) {
      for (size_t s = 0; s < prompts.size(); ++s) {
        const auto& g = shipped[size_t(i)][s];
        const auto& r = ref[size_t(i)][s];
        EXPECT_LE(rel_l2(unfused[size_t(i)][s], generic[size_t(i)][s]), path_tol)
            << "unfused decode vs generic, step " << i << " sequence " << s << " dtype "
            << int(dtype);
        const double e = rel_l2(g, r), e_generic = rel_l2(generic[size_t(i)][s], r);
        EXPECT_LE(e, tol) << "vs CPU, step " << i << " sequence " << s << " dtype " << int(dtype);
        shipped_sq += e * e;
        generic_sq += e_generic * e_generic;
        if (margins[s][size_t(i)] <= margin) continue;
        ++clear_steps;
        const int32_t top = int32_t(std::max_element(g.begin(), g.end()) - g.begin());
        EXPECT_EQ(top, paths[s][size_t(i)]) << "step " << i << " sequence " << s << " margin "
                                            << margins[s][size_t(i)] << " dtype " << int(dtype);
      }
    }
    std::printf("[ accuracy ] %s dtype %d: relative L2 vs CPU over all steps: shipped %.4g, "
                "generic %.4g\n", GetParam().c_str(), int(dtype), std::sqrt(shipped_sq),
                std::sqrt(generic_sq));
    EXPECT_LE(std::sqrt(shipped_sq), 1.5 * std::sqrt(generic_sq))
        << "the shipped decode path is less accurate than the generic one, dtype " << int(dtype);
    EXPECT_GT(clear_steps, 10);
  }
}

// Tensor-parallel degrees from 2 up to this machine's GPUs (at most 4) that split `d`.
std::vector<int> split_degrees(const DecoderDesc& d) {
  return testing::splitting_degrees(d, std::min(cuda_device_count(), 4));
}

// Tensor parallelism over NCCL, one GPU a rank (needs 2+ GPUs: scripts/gpu_tests.sh runs it
// only on machines that have them): at every degree up to the GPU count that splits the fixture,
// fp32 greedy ids equal transformers' and logits are within 1e-4, eager and from CUDA graphs
// (the NCCL calls inside the captured decode steps).
TEST_P(CudaHfParity, TensorParallelFp32MatchesTransformers) {
  REQUIRE_GPU();
  const int gpus = cuda_device_count();
  // On one GPU, scripts/gpu_tests.sh leaves this test out (under LMX_REQUIRE_GPU=1 it fails here).
  LMX_GPU_SKIP_UNLESS(gpus >= 2, "tensor parallelism needs 2+ GPUs; this machine has " << gpus);
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  const std::vector<int> degrees = split_degrees(model.desc);
  for (int degree : degrees) {
    for (bool graphs : {false, true}) {
      CudaBackendOptions o = options(CudaDtype::F32);
      o.tensor_parallel_degree = degree;
      o.cuda_graphs = graphs;
      auto backend = make_cuda_backend(model, o);
      ASSERT_EQ(backend->tensor_parallel_degree(), degree);
      SCOPED_TRACE("degree " + std::to_string(degree) + (graphs ? ", graphs" : ", eager"));
      expect_fp32_cases(*backend, f.expected);
    }
  }
  EXPECT_FALSE(degrees.empty()) << "no degree in 2.." << std::min(gpus, 4) << " splits " << GetParam();
}

// Tensor parallelism in fp16 and bf16 at every degree up to the GPU count that splits the
// fixture: on clear steps the top-1 is transformers' token, as at degree 1 (the same greedy
// tokens), and the logits stay within the half-precision tolerance of the CPU fp32 reference.
TEST_P(CudaHfParity, TensorParallelHalfPrecisionTopOneOnClearSteps) {
  REQUIRE_GPU();
  const int gpus = cuda_device_count();
  // On one GPU, scripts/gpu_tests.sh leaves this test out (under LMX_REQUIRE_GPU=1 it fails here).
  LMX_GPU_SKIP_UNLESS(gpus >= 2, "tensor parallelism needs 2+ GPUs; this machine has " << gpus);
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  auto cpu = make_cpu_backend(model, {16, 256});
  const std::vector<int> degrees = split_degrees(model.desc);
  for (int degree : degrees) {
    for (const HalfPrecision& half : half_precisions(model.desc)) {
      CudaBackendOptions o = options(half.dtype);
      o.tensor_parallel_degree = degree;
      auto backend = make_cuda_backend(model, o);
      SCOPED_TRACE("degree " + std::to_string(degree));
      EXPECT_GT(expect_half_precision_cases(*backend, *cpu, f.expected, half), 10);
    }
  }
  EXPECT_FALSE(degrees.empty()) << "no degree in 2.." << std::min(gpus, 4) << " splits " << GetParam();
}

// The whole-row draw of `logits` [rows, vocab] (host) on the GPU: kernels::cuda::sample.
std::vector<SampledToken> gpu_draw(const std::vector<float>& logits, int vocab,
                                   const std::vector<kernels::SamplingRow>& params) {
  const int rows = int(params.size());
  float *dl = nullptr, *dlp = nullptr;
  int32_t* dids = nullptr;
  kernels::SamplingRow* dp = nullptr;
  EXPECT_EQ(cudaMalloc(&dl, logits.size() * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dlp, size_t(rows) * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dids, size_t(rows) * sizeof(int32_t)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dp, size_t(rows) * sizeof(kernels::SamplingRow)), cudaSuccess);
  cudaMemcpy(dl, logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dp, params.data(), params.size() * sizeof(kernels::SamplingRow), cudaMemcpyHostToDevice);
  kernels::cuda::sample(dl, rows, vocab, dp, nullptr, 0, nullptr, dids, dlp, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  std::vector<float> lp(static_cast<size_t>(rows));
  cudaMemcpy(ids.data(), dids, ids.size() * sizeof(int32_t), cudaMemcpyDeviceToHost);
  cudaMemcpy(lp.data(), dlp, lp.size() * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dl), cudaFree(dlp), cudaFree(dids), cudaFree(dp);
  std::vector<SampledToken> out;
  for (int i = 0; i < rows; ++i) out.push_back({ids[size_t(i)], lp[size_t(i)]});
  return out;
}

// Tensor parallelism draws greedy and seeded rows from each rank's vocabulary shard (no gather of
// the logits): at every degree up to the GPU count that splits the fixture, eager and from graphs,
// every step's tokens equal the GPU's draw over the same step's gathered logits, log-probs within
// float rounding. The fixture's prompts as one batch, then 5 decode steps of their own draws.
TEST_P(CudaHfParity, TensorParallelDrawsWithoutGatheringTheLogits) {
  REQUIRE_GPU();
  const int gpus = cuda_device_count();
  // On one GPU, scripts/gpu_tests.sh leaves this test out (under LMX_REQUIRE_GPU=1 it fails here).
  LMX_GPU_SKIP_UNLESS(gpus >= 2, "tensor parallelism needs 2+ GPUs; this machine has " << gpus);
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir);
  const int V = model.desc.vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (const json& c : f.expected["cases"]) prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
  const int rows = int(prompts.size()), steps = 6;
  const std::vector<int> degrees = split_degrees(model.desc);
  for (int degree : degrees) {
    for (bool graphs : {false, true}) {
      SCOPED_TRACE("degree " + std::to_string(degree) + (graphs ? ", graphs" : ", eager"));
      CudaBackendOptions o = options(CudaDtype::F32);
      o.tensor_parallel_degree = degree;
      o.cuda_graphs = graphs;
      auto backend = make_cuda_backend(model, o);
      ASSERT_TRUE(backend->draws_sharded());
      std::vector<std::vector<int32_t>> blocks(static_cast<size_t>(rows));
      int next_block = 0;
      for (int i = 0; i < rows; ++i)
        for (int b = 0; b * o.kv_block_size < int(prompts[size_t(i)].size()) + steps; ++b)
          blocks[size_t(i)].push_back(next_block++);
      std::vector<std::vector<int32_t>> next = prompts;
      std::vector<int> start(static_cast<size_t>(rows), 0);
      for (int step = 0; step < steps; ++step) {
        std::vector<BatchChunk> chunks;
        std::vector<SampleSpec> specs(static_cast<size_t>(rows));
        std::vector<kernels::SamplingRow> params;
        for (int i = 0; i < rows; ++i) {
          chunks.push_back({next[size_t(i)], start[size_t(i)], blocks[size_t(i)], true});
          kernels::SamplingRow& p = specs[size_t(i)].params;
          p.greedy = i % 2 == 0;
          p.temperature = 0.8f + 0.4f * float(i);
          p.seed = 77 + uint64_t(i);
          p.step = uint64_t(step);
          params.push_back(p);
        }
        std::vector<SampledToken> drawn(static_cast<size_t>(rows));
        backend->forward_sample(chunks, specs, drawn);
        std::vector<float> logits;  // the same step again (the same K/V written), gathered
        backend->forward(chunks, logits);
        const std::vector<SampledToken> want = gpu_draw(logits, V, params);
        for (int i = 0; i < rows; ++i) {
          SCOPED_TRACE("step " + std::to_string(step) + ", row " + std::to_string(i));
          EXPECT_EQ(drawn[size_t(i)].id, want[size_t(i)].id);
          EXPECT_NEAR(drawn[size_t(i)].logprob, want[size_t(i)].logprob,
                      1e-5 * std::max(1.0f, std::fabs(want[size_t(i)].logprob)) + 1e-5);
          start[size_t(i)] += int(next[size_t(i)].size());
          next[size_t(i)] = {drawn[size_t(i)].id};
        }
      }
    }
  }
  EXPECT_FALSE(degrees.empty()) << "no degree in 2.." << std::min(gpus, 4) << " splits " << GetParam();
}

// A quantized model on the GPU against the CPU backend's reference of the same quantization
// (fp32 activations), teacher-forced along transformers' greedy path, at degree 1 and every degree
// up to the GPU count that splits the fixture (each rank quantizes its own slice on both sides).
// q[s] is the quantization's own error at step s (the CPU quantized logits against the CPU fp32
// ones). Each step's logits must be within the dtype's tolerance plus `q_weight` q[s] of the CPU
// reference's, and the top-1 equal to the reference's wherever that one's margin (top-1 minus
// top-2) exceeds 0.5 logits.
// against_fp32: the bound holds against the CPU fp32 (unquantized) logits instead, with no top-1
// check (the quantized reference itself may pick another token there): a path that computes
// another quantization of the model (fp8's decode GEMV: 16-bit activations) must be no further
// from the model than the reference's quantization is, times q_weight. decode_gemv false: decode
// rows take the GEMMs too (CudaBackendOptions::skinny_gemv off: no weight-streaming kernel, no
// norm folding), so every row runs the reference's arithmetic. case_scale: q is
// max(q[s], the RMS of q over the case) -- where the quantization noise is as large as fp8's, a
// step's own q[s] may be small by chance while both runs carry the case's noise in their KV
// cache -- and no top-1 check (with logits moved by 10-60% a 0.5 margin is not clear).
struct QuantizedRun {
  const char* label;
  double fp32_tol, fp32_q_weight;  // fp32 on the GPU
  double half_q_weight;            // fp16 / bf16: the half-precision tolerance plus this many q
  bool decode_gemv = true;
  bool against_fp32 = false;
  bool case_scale = false;
  bool split = true;  // also at the tensor-parallel degrees the fixture splits into
};

void expect_quantized_matches_cpu(const testing::ParityFixture& f, const std::string& name,
                                  const LoadedModel& model, const QuantizedRun& how) {
  const LoadedModel plain = load_model(f.model_dir);
  std::vector<int> degrees = {1};
  if (how.split)
    for (int degree : split_degrees(model.desc)) degrees.push_back(degree);
  auto cpu32 = make_cpu_backend(plain, {16, 256});
  for (int degree : degrees) {
    auto cpu = make_cpu_backend(model, {16, 256}, degree);
    std::vector<std::vector<std::vector<float>>> ref;
    std::vector<std::vector<double>> q;
    for (const json& c : f.expected["cases"]) {
      const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      const auto path = c["greedy_ids"].get<std::vector<int32_t>>();
      const auto quantized = forced_logits(*cpu, prompt, path);
      const auto fp32 = forced_logits(*cpu32, prompt, path);
      auto& qc = q.emplace_back();
      for (size_t s = 0; s < path.size(); ++s) qc.push_back(rel_l2(quantized[s], fp32[s]));
      ref.push_back(how.against_fp32 ? fp32 : quantized);
    }
    std::vector<HalfPrecision> runs = {{CudaDtype::F32, 0.5, how.fp32_tol}};
    for (const HalfPrecision& h : half_precisions(model.desc)) runs.push_back({h.dtype, 0.5, h.tol});
    for (const HalfPrecision& run : runs) {
      CudaBackendOptions o = options(run.dtype);
      o.tensor_parallel_degree = degree;
      o.skinny_gemv = how.decode_gemv;
      auto gpu = make_cuda_backend(model, o);
      SCOPED_TRACE("degree " + std::to_string(degree) + " dtype " + std::to_string(int(run.dtype)));
      const double q_weight = run.dtype == CudaDtype::F32 ? how.fp32_q_weight : how.half_q_weight;
      double worst = 0, worst_q = 0, worst_ratio = 0;
      int clear = 0;
      size_t i = 0;
      for (const json& c : f.expected["cases"]) {
        const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
        const auto path = c["greedy_ids"].get<std::vector<int32_t>>();
        const auto g = forced_logits(*gpu, prompt, path);
        const auto& r = ref[i];
        double case_q = 0;  // the RMS of q over the case
        for (double v : q[i]) case_q += v * v;
        case_q = q[i].empty() ? 0 : std::sqrt(case_q / double(q[i].size()));
        for (size_t s = 0; s < path.size(); ++s) {
          const double e = rel_l2(g[s], r[s]);
          const double qs = how.case_scale ? std::max(q[i][s], case_q) : q[i][s];
          worst = std::max(worst, e);
          worst_q = std::max(worst_q, q[i][s]);
          if (qs > 0) worst_ratio = std::max(worst_ratio, (e - run.tol) / qs);
          EXPECT_LE(e, run.tol + q_weight * qs) << "case " << i << " step " << s;
          if (how.against_fp32 || how.case_scale) continue;
          std::vector<float> sorted = r[s];
          std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
          if (sorted[0] - sorted[1] <= run.margin) continue;
          ++clear;
          EXPECT_EQ(std::max_element(g[s].begin(), g[s].end()) - g[s].begin(),
                    std::max_element(r[s].begin(), r[s].end()) - r[s].begin())
              << "case " << i << " step " << s;
        }
        ++i;
      }
      std::printf("[ %-8s ] %s degree %d dtype %d: worst relative L2 vs CPU %s %.3g, (that - tol) "
                  "/ q up to %.2f (CPU quantized vs fp32: worst %.3g) over %d clear steps\n",
                  how.label, name.c_str(), degree, int(run.dtype),
                  how.against_fp32 ? "fp32" : "quantized", worst, worst_ratio, worst_q, clear);
      if (!how.against_fp32 && !how.case_scale) {
        EXPECT_GT(clear, 5);
      }
    }
  }
}

// Every token's logits in one forward (BatchChunk::all_logits, what lmx perplexity --device cuda
// runs): each case's prompt and greedy path as one chunk, row by row against the CPU backend's
// all_logits of the same model: fp32 within 1e-4 relative L2 (plain and dynamic_int8: the same
// int8 bytes), fp16 within its model tolerance (half_precisions). A plain one-token step after it
// gives its own one row again (the ordinary head buffers), and forward_sample refuses all_logits.
TEST_P(CudaHfParity, AllLogitsMatchTheCpuBackend) {
  REQUIRE_GPU();
  const auto f = open_parity_fixture(GetParam());
  struct Run {
    LinearQuant quant;
    CudaDtype dtype;
    double tol;
  };
  const DecoderDesc desc = load_model(f.model_dir).desc;
  for (const Run& run : {Run{LinearQuant{}, CudaDtype::F32, 1e-4},
                         Run{LinearQuant{}, CudaDtype::F16, half_precisions(desc)[0].tol},
                         Run{dynamic_int8(), CudaDtype::F32, 1e-4}}) {
    const LoadedModel model = load_model(f.model_dir, run.quant);
    auto cuda = make_cuda_backend(model, options(run.dtype));
    auto cpu = make_cpu_backend(model, {16, 256});
    ASSERT_TRUE(cuda->supports_all_logits());
    const size_t V = size_t(model.desc.vocab_size);
    for (const json& c : f.expected["cases"]) {
      std::vector<int32_t> ids = c["prompt_ids"].get<std::vector<int32_t>>();
      for (int32_t t : c["greedy_ids"].get<std::vector<int32_t>>()) ids.push_back(t);
      std::vector<int32_t> table;
      for (size_t b = 0; b * 16 < ids.size() + 1; ++b) table.push_back(int32_t(b));
      BatchChunk chunk{ids, 0, table, true, true};
      std::vector<float> got, want;
      cuda->forward(std::span(&chunk, 1), got);
      cpu->forward(std::span(&chunk, 1), want);
      ASSERT_EQ(got.size(), ids.size() * V);
      ASSERT_EQ(want.size(), ids.size() * V);
      for (size_t i = 0; i < ids.size(); ++i)
        EXPECT_LE(rel_l2(std::span(got).subspan(i * V, V), std::span(want).subspan(i * V, V)),
                  run.tol)
            << "position " << i << " of " << ids.size() << ", dtype " << int(run.dtype)
            << (run.quant.kind == QuantKind::None ? "" : ", dynamic_int8");
      // The next token as a plain step: its one row, from the ordinary head buffers.
      const int32_t next = c["greedy_ids"].get<std::vector<int32_t>>().back();
      BatchChunk step{std::span(&next, 1), int(ids.size()), table, true, false};
      cuda->forward(std::span(&step, 1), got);
      cpu->forward(std::span(&step, 1), want);
      ASSERT_EQ(got.size(), V);
      EXPECT_LE(rel_l2(got, want), run.tol) << "the plain step after all_logits";
      std::vector<SampledToken> out(1);
      const SampleSpec spec{};
      EXPECT_THROW(cuda->forward_sample(std::span(&chunk, 1), std::span(&spec, 1), out, nullptr),
                   Error);
    }
  }
}

// dynamic_int8 (per output channel):
//  - fp32: the same int8 bytes (both quantize the fp32 weights), logits within 1e-4 relative;
//  - fp16 / bf16: on the fused decode path of pre-norm families the GPU quantizes W diag(norm
//    weight) (the norm folded in first) where the CPU quantizes W: two quantizations of the model,
//    which differ by about sqrt(2) q[s]. Bound: 4 q[s] (on the H100, 2026-11-25, the largest step
//    of the RMSNorm families took 2.5 q[s], on the bias-heavy Qwen2 fixtures in fp16; with the
//    LayerNorm families folded too, 2026-11-26, 3.12 q[s] on gpt_neo_mixed_local in fp16, whose
//    random norm weights spread the folded columns' scales). The kernels themselves are held to
//    the exact reference in tests/kernels/int8_gemv_test.cu, and the unquantized fp16 / bf16
//    parity tests hold the fold itself.
TEST_P(CudaHfParity, DynamicInt8MatchesCpuInt8) {
  REQUIRE_GPU();
  const auto f = open_parity_fixture(GetParam());
  expect_quantized_matches_cpu(f, GetParam(), load_model(f.model_dir, dynamic_int8()),
                               {"int8", 1e-4, 0.0, 4.0});
}

// dynamic_int8 with a group size of 64 (scales [out, in / 64]): the grouped GEMV, W8A16 GEMM and
// dequantized prefill against the CPU's grouped int8, with the per-channel test's bounds (a
// grouped scale is never coarser than the row's, so q[s] only shrinks). Fixtures with a
// projection whose input size 64 does not divide are refused at load, naming the group size.
// Degree 1 only: the fixtures' 64-column inputs split into shards narrower than a group (refused,
// tests/unit); the kernels see a rank's shard as a whole projection.
TEST_P(CudaHfParity, DynamicInt8GroupedMatchesCpuGroupedInt8) {
  REQUIRE_GPU();
  const auto f = open_parity_fixture(GetParam());
  std::optional<LoadedModel> model;
  try {
    model.emplace(load_model(f.model_dir, dynamic_int8(64)));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("group size 64 does not divide"), std::string::npos)
        << e.what();
    return;
  }
  QuantizedRun how{"int8 grouped", 1e-4, 0.0, 4.0};
  how.split = false;
  expect_quantized_matches_cpu(f, GetParam(), *model, how);
}

// smoothquant (W8A8, alpha 0.5, calibrated on the fixture's own prompts and greedy paths: the
// synthetic fixtures have no tokenizer; the plan is made once on the CPU and both backends load
// the same marks):
//  - fp32: the same weight bytes and, step by step, the same activation codes until the fp32
//    rounding of the other ops (attention, norms: another summation order) puts one value on the
//    other side of a rounding edge. From there the two runs carry a different quantization
//    noise: one code off moves that input by a whole quantization step, which flips codes in the
//    next layers, so the runs differ by up to about the quantization's own error. Bound: 2 q[s]
//    (on the H100, 2026-11-25: up to 0.99 q[s], stories260k);
//  - fp16 / bf16: prefill rows run W8A8 and decode rows the int8-weight GEMV with 16-bit
//    activations (no activation quantization), on weights rounded to 16 bits before quantizing:
//    3 q[s], as dynamic_int8 (2.17 q[s] at most on the H100). The kernels themselves are held to
//    the exact reference in tests/kernels/w8a8_test.cu.
TEST_P(CudaHfParity, SmoothQuantMatchesCpuSmoothQuant) {
  REQUIRE_GPU();
  const auto f = open_parity_fixture(GetParam());
  LoadedModel model = load_model(f.model_dir);
  std::vector<std::vector<int32_t>> samples;
  for (const json& c : f.expected["cases"]) {
    auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto path = c["greedy_ids"].get<std::vector<int32_t>>();
    ids.insert(ids.end(), path.begin(), path.end());
    samples.push_back(std::move(ids));
  }
  const smoothquant::Plan plan =
      smoothquant::calibrate_and_plan(model, {}, samples, smoothquant::kSearchRows, 0.5);
  smoothquant::mark(model, plan);
  expect_quantized_matches_cpu(f, GetParam(), model, {"w8a8", 1e-4, 2.0, 3.0});
}

// fp8 (E4M3 W8A8, per-channel weights, per-token activations). E4M3 keeps 3 significant bits,
// so on these small random models the quantization moves the logits by q = 0.05-0.6 relative
// (int8: ~0.01-0.1), and runs that round one value differently soon differ by about that much:
// the bounds use the case's scale of q and no top-1 check (QuantizedRun::case_scale). A wiring
// error (a wrong scale, layout or padding) moves logits by O(1), past these bounds; the kernels
// themselves are held to the reference tightly in tests/kernels/fp8_linear_test.cu.
//  - Every row through Fp8Gemm (decode_gemv off), the reference's arithmetic: fp32 and fp16 /
//    bf16 carry the reference's weight bytes (16-bit: from weights rounded to T first) and,
//    until another op's rounding puts a value on the other side of an E4M3 rounding edge, its
//    activation bytes; from there on a different quantization noise. Bound: 3 q.
//  - As served (decode rows through the GEMV on E4M3 weights with 16-bit activations, the norm
//    folded into the weights on the fused path of RMSNorm families): another quantization of the
//    model, judged against the unquantized CPU model: within the half-precision tolerance plus
//    3 q, i.e. about as far from the model as the reference's own quantization.
// H100, 2026-11-26, with each step's own q: up to 3.5 q (stories260k fp32, a step whose q was
// small), the other fixtures up to 3.0 q; with the case scale see the printed ratios.
TEST_P(CudaHfParity, Fp8MatchesCpuFp8) {
  REQUIRE_GPU();
  const auto f = open_parity_fixture(GetParam());
  const LoadedModel model = load_model(f.model_dir, LinearQuant{QuantKind::Fp8});
  expect_quantized_matches_cpu(f, GetParam(), model,
                               {"fp8", 1e-4, 3.0, 3.0, /*decode_gemv=*/false,
                                /*against_fp32=*/false, /*case_scale=*/true});
  expect_quantized_matches_cpu(f, GetParam(), model,
                               {"fp8 gemv", 1e-4, 3.0, 3.0, /*decode_gemv=*/true,
                                /*against_fp32=*/true, /*case_scale=*/true});
}

// A served random-weight benchmark model (config.json with lmx_random_weights) keeps the
// quantization option.quantize asked for: its fp32 logits are those of the same random weights
// quantized through make_random_cuda_backend (up to the GEMMs' timed algorithm choices: another
// summation order), ten times closer to them than to the unquantized model's (the quantization
// was once dropped: a benchmark of option.quantize=fp8 measured fp16).
TEST(CudaRandomWeights, ServedModelKeepsItsQuantization) {
  REQUIRE_GPU();
  testing::TempDir dir;
  json config = testing::tiny_llama_config();
  config["lmx_random_weights"] = {{"seed", 7}};
  std::ofstream(dir.path() / "config.json") << config.dump();
  const std::vector<int32_t> prompt = {1, 5, 9, 13, 2, 7}, path = {3, 4, 8, 6};
  const CudaBackendOptions o = options(CudaDtype::F32);
  for (const LinearQuant& quant : {dynamic_int8(), LinearQuant{QuantKind::Fp8}}) {
    SCOPED_TRACE(quant.method());
    const LoadedModel served = load_model(dir.path(), quant);
    auto backend = make_cuda_backend(served, o);
    auto direct = make_random_cuda_backend(served.desc, o, 7, quant);
    auto plain = make_cuda_backend(load_model(dir.path()), o);
    const auto g = forced_logits(*backend, prompt, path);
    const auto d = forced_logits(*direct, prompt, path);
    const auto p = forced_logits(*plain, prompt, path);
    for (size_t s = 0; s < path.size(); ++s)
      EXPECT_LT(10 * rel_l2(g[s], d[s]), rel_l2(g[s], p[s])) << "step " << s;
  }
}

// An fp8 checkpoint (compressed-tensors, per-channel scales written by the CPU reference
// quantizer from a tiny Llama's fp32 weights) on the GPU, its codes loaded as stored (the encode
// kernel, rows padded for the FP8 GEMM, norms left unfolded). fp32: its logits are those of the
// same fp32 weights quantized at load (option.quantize=fp8) up to the GEMMs' timed algorithm
// choices, ten times closer to them than to the unquantized model's. fp16 / bf16: finite and
// within 0.1 relative of the fp32 run (a sanity bound: activations rounded to 16 bits before
// their per-token E4M3 quantization may move a code, 6.25% of a value at most).
TEST(CudaFp8Checkpoint, LoadsTheCodesAsStored) {
  REQUIRE_GPU();
  json config = testing::tiny_llama_config();
  config["num_hidden_layers"] = 2;
  const auto fp32_tensors = testing::tiny_llama_tensors(config);
  testing::TempDir plain, fp8;
  std::ofstream(plain.path() / "config.json") << config.dump();
  testing::write_file(plain.path() / "model.safetensors", testing::safetensors_bytes(fp32_tensors));
  config["quantization_config"] = testing::compressed_tensors_config("channel");
  std::ofstream(fp8.path() / "config.json") << config.dump();
  testing::write_file(fp8.path() / "model.safetensors",
                      testing::safetensors_bytes(testing::fp8_tensors(fp32_tensors, 2, false)));
  const std::vector<int32_t> prompt = {1, 5, 9, 13, 2, 7}, path = {3, 4, 8, 6};
  const auto stored =
      forced_logits(*make_cuda_backend(load_model(fp8.path()), options(CudaDtype::F32)), prompt, path);
  const auto at_load = forced_logits(
      *make_cuda_backend(load_model(plain.path(), LinearQuant{QuantKind::Fp8}), options(CudaDtype::F32)),
      prompt, path);
  const auto unquantized =
      forced_logits(*make_cuda_backend(load_model(plain.path()), options(CudaDtype::F32)), prompt, path);
  for (size_t s = 0; s < path.size(); ++s)
    EXPECT_LT(10 * rel_l2(stored[s], at_load[s]), rel_l2(stored[s], unquantized[s])) << "step " << s;
  for (CudaDtype dtype : {CudaDtype::F16, CudaDtype::BF16}) {
    const auto half = forced_logits(*make_cuda_backend(load_model(fp8.path()), options(dtype)), prompt, path);
    for (size_t s = 0; s < path.size(); ++s) {
      for (float v : half[s]) ASSERT_TRUE(std::isfinite(v)) << "step " << s;
      EXPECT_LT(rel_l2(half[s], stored[s]), 0.1) << (dtype == CudaDtype::F16 ? "fp16" : "bf16")
                                                 << " step " << s;
    }
  }
}

// A block-scaled fp8 checkpoint (weight_block_size [128, 128]) whose blocks differ in magnitude,
// on the GPU: its codes and block scales as stored, read by the GEMV (decode rows) and the W8A16
// GEMM (prefill) with 16-bit activations, so its logits are those of the model of its dequantized
// weights in the same dtype up to that dtype's rounding (2e-2; the dequantized model runs other
// kernels: its norms folded into its weights, cuBLAS for prefill), and four times closer to them
// than quantizing those weights per row (option.quantize=fp8) gets (H100, 2026-11-27: 0.014-0.018
// against 0.11-0.13; a block scale misapplied moves logits by O(1)). fp32 is refused by name.
TEST(CudaFp8Checkpoint, BlockScaledComputesWithItsBlockScales) {
  REQUIRE_GPU();
  json config = testing::tiny_llama_config();
  config["num_hidden_layers"] = 2;
  config["hidden_size"] = 256;
  config["intermediate_size"] = 256;
  auto fp32_tensors = testing::tiny_llama_tensors(config);
  testing::vary_block_magnitudes(fp32_tensors);
  const auto block = testing::fp8_block_tensors(fp32_tensors, 2);
  testing::TempDir dequantized, fp8;
  std::ofstream(dequantized.path() / "config.json") << config.dump();
  testing::write_file(dequantized.path() / "model.safetensors",
                      testing::safetensors_bytes(testing::dequantized_block_tensors(block)));
  config["quantization_config"] = testing::block_fp8_config();
  std::ofstream(fp8.path() / "config.json") << config.dump();
  testing::write_file(fp8.path() / "model.safetensors", testing::safetensors_bytes(block));
  const std::vector<int32_t> prompt = {1, 5, 9, 13, 2, 7}, path = {3, 4, 8, 6};
  for (CudaDtype dtype : {CudaDtype::F16, CudaDtype::BF16}) {
    SCOPED_TRACE(dtype == CudaDtype::F16 ? "fp16" : "bf16");
    const auto stored =
        forced_logits(*make_cuda_backend(load_model(fp8.path()), options(dtype)), prompt, path);
    const auto model = forced_logits(
        *make_cuda_backend(load_model(dequantized.path()), options(dtype)), prompt, path);
    const auto per_row = forced_logits(
        *make_cuda_backend(load_model(dequantized.path(), LinearQuant{QuantKind::Fp8}),
                           options(dtype)),
        prompt, path);
    for (size_t s = 0; s < path.size(); ++s) {
      EXPECT_LT(rel_l2(stored[s], model[s]), 2e-2) << "step " << s;
      EXPECT_LT(4 * rel_l2(stored[s], model[s]), rel_l2(per_row[s], model[s])) << "step " << s;
    }
  }
  try {
    make_cuda_backend(load_model(fp8.path()), options(CudaDtype::F32));
    ADD_FAILURE() << "a block-scaled fp8 checkpoint loaded in fp32 on the GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp16 or bf16"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaHfParity, ::testing::ValuesIn(parity_fixture_names()),
                         testing::ParityNamePrinter());

// Tuned attention kernels (head_dim 64 / 128) through the whole backend: against the generic
// kernel in the same dtype (fp16: only the attention kernels differ, so 5e-3 relative L2 and the
// same top-1), and against the CPU fp32 reference within the fp16 model tolerance (2e-2).
class CudaVsCpu : public ::testing::TestWithParam<int> {};

// A 2-layer Llama checkpoint with the given head_dim (4 query heads, 2 kv heads) written to dir.
LoadedModel write_head_dim_model(const fs::path& dir, int head_dim) {
  json config = testing::tiny_llama_config();
  config["hidden_size"] = 2 * head_dim;
  config["num_attention_heads"] = 4;
  config["num_key_value_heads"] = 2;
  config["head_dim"] = head_dim;
  config["num_hidden_layers"] = 2;
  config["intermediate_size"] = 96;
  config["vocab_size"] = 64;
  config["max_position_embeddings"] = 512;
  std::ofstream(dir / "config.json") << config.dump();
  auto tensors = testing::tiny_llama_tensors(config);
  // tiny_llama_tensors derives head_dim from hidden/heads: rebuild the attention projections.
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    auto resize = [&](const std::string& n, std::vector<int64_t> shape) {
      auto& t = tensors[p + n];
      t.shape = shape;
      t.values.resize(size_t(shape[0] * shape[1]));
      // Deterministic values of standard deviation ~0.06: attention scores of order 1, so the
      // softmax is not decided by rounding.
      for (size_t i = 0; i < t.values.size(); ++i) t.values[i] = 0.1f * std::sin(float(i) * 12.9898f);
    };
    resize("q_proj.weight", {4 * head_dim, 2 * head_dim});
    resize("k_proj.weight", {2 * head_dim, 2 * head_dim});
    resize("v_proj.weight", {2 * head_dim, 2 * head_dim});
    resize("o_proj.weight", {2 * head_dim, 4 * head_dim});
  }
  testing::write_file(dir / "model.safetensors", testing::safetensors_bytes(tensors));
  return load_model(dir);
}

std::vector<int32_t> long_prompt() {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 300; ++i) prompt.push_back((i * 37) % 64);
  return prompt;
}
const std::vector<int32_t> kForcedPath = {5, 9, 11, 3, 7, 60, 1, 2};

size_t argmax(const std::vector<float>& v) {
  return size_t(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST_P(CudaVsCpu, TunedAttentionHeadDims) {
  REQUIRE_GPU();
  const int head_dim = GetParam();
  testing::TempDir dir;
  const LoadedModel model = write_head_dim_model(dir.path(), head_dim);
  auto cuda = make_cuda_backend(model, options(CudaDtype::F16));
  CudaBackendOptions generic_opts = options(CudaDtype::F16);
  generic_opts.generic_attention = true;
  auto generic = make_cuda_backend(model, generic_opts);
  auto cpu = make_cpu_backend(model, {16, 256});
  const std::vector<int32_t> prompt = long_prompt(), path = kForcedPath;
  const auto g = forced_logits(*cuda, prompt, path);
  const auto r = forced_logits(*generic, prompt, path);
  const auto c = forced_logits(*cpu, prompt, path);
  for (size_t s = 0; s < path.size(); ++s) {
    EXPECT_LE(rel_l2(g[s], r[s]), 5e-3) << "tuned vs generic, step " << s << " head_dim " << head_dim;
    EXPECT_EQ(argmax(g[s]), argmax(r[s])) << "tuned vs generic, step " << s;
    // fp16 against fp32: step 3 at head_dim 128 measures ~2.0e-2 on both decode paths (shipped
    // 0.0200, projections unfused 0.0198 on the H100), the other steps 1e-3 to 9e-3.
    EXPECT_LE(rel_l2(g[s], c[s]), 2.5e-2) << "step " << s << " head_dim " << head_dim;

  }
}

// option.kv_cache_dtype=fp8 (E4M3 cache) through the whole backend.
//  - fp32 compute: K and V reach the E4M3 rounding as the same fp32 values the CPU reference
//    rounds (up to summation order), so the logits match the CPU's fp8 emulation within 1e-3.
//  - fp16 compute (rope + K/V write in the decode qkv projection's epilogue and in the prefill's
//    rope kernel, tuned decode and prefill attention over the fp8 cache): against the same backend
//    with the generic attention kernel, 5e-3 and the same top-1. Not against the CPU: K and V
//    rounded to fp16 first land on the other side of an E4M3 rounding boundary for about one
//    value in a hundred (a whole E4M3 step, 6%), which on this tiny model moves the logits by up
//    to 9e-2 (H100) -- the same order as fp8 storage itself moves them (printed).
// The checks of one model (its kv_scales, if any, apply to every fp8 backend here, CPU and CUDA).
void expect_fp8_cache_matches_cpu(const LoadedModel& model, int head_dim) {
  auto fp8 = [](CudaDtype dtype, bool generic) {
    CudaBackendOptions o = options(dtype);
    o.kv_dtype = kernels::KvDtype::fp8_e4m3;
    o.generic_attention = generic;
    return o;
  };
  auto f32 = make_cuda_backend(model, fp8(CudaDtype::F32, false));
  auto tuned = make_cuda_backend(model, fp8(CudaDtype::F16, false));
  auto generic = make_cuda_backend(model, fp8(CudaDtype::F16, true));
  ASSERT_EQ(tuned->kv_shape().dtype, kernels::KvDtype::fp8_e4m3);
  EXPECT_EQ(tuned->kv_cache_dtype_name(), "fp8_e4m3");
  EXPECT_EQ(make_cuda_backend(model, options(CudaDtype::BF16))->kv_cache_dtype_name(), "bf16");
  auto cpu = make_cpu_backend(model, {16, 256, kernels::KvDtype::fp8_e4m3});
  auto cpu_exact = make_cpu_backend(model, {16, 256});
  const std::vector<int32_t> prompt = long_prompt(), path = kForcedPath;
  const auto a = forced_logits(*f32, prompt, path);
  const auto g = forced_logits(*tuned, prompt, path);
  const auto r = forced_logits(*generic, prompt, path);
  const auto c = forced_logits(*cpu, prompt, path);
  const auto e = forced_logits(*cpu_exact, prompt, path);
  for (size_t s = 0; s < path.size(); ++s) {
    EXPECT_LE(rel_l2(a[s], c[s]), 1e-3) << "fp32 vs CPU, step " << s << " head_dim " << head_dim;
    EXPECT_EQ(argmax(a[s]), argmax(c[s])) << "fp32 vs CPU, step " << s;
    EXPECT_LE(rel_l2(g[s], r[s]), 5e-3) << "tuned vs generic, step " << s << " head_dim " << head_dim;
    EXPECT_EQ(argmax(g[s]), argmax(r[s])) << "tuned vs generic, step " << s;
    std::printf("[ fp8 kv   ] head_dim %d step %zu: fp32 vs CPU fp8 %.2e, fp16 vs CPU fp8 %.2e, "
                "CPU fp8 vs CPU fp32 cache %.2e\n",
                head_dim, s, rel_l2(a[s], c[s]), rel_l2(g[s], c[s]), rel_l2(c[s], e[s]));
  }
}

TEST_P(CudaVsCpu, Fp8KvCacheMatchesCpuEmulation) {
  REQUIRE_GPU();
  const int head_dim = GetParam();
  testing::TempDir dir;
  const LoadedModel model = write_head_dim_model(dir.path(), head_dim);
  expect_fp8_cache_matches_cpu(model, head_dim);
}

// The same with per-layer scales (LoadedModel::kv_scales, as the engine sets them): the CUDA
// backend hands each layer's scales to its cache writes and attention kernels, the CPU backend
// to its cache writes. Powers of two, different per layer and for K and V, so a scale applied
// to the wrong layer, tensor or side (write vs read) moves the logits far past the bounds.
TEST_P(CudaVsCpu, Fp8KvCacheWithPerLayerScalesMatchesCpuEmulation) {
  REQUIRE_GPU();
  const int head_dim = GetParam();
  testing::TempDir dir;
  LoadedModel model = write_head_dim_model(dir.path(), head_dim);
  for (int l = 0; l < model.desc.num_layers; ++l)
    model.kv_scales.push_back(l % 2 ? kernels::KvScale{2.0f, 0.25f}
                                    : kernels::KvScale{0.125f, 4.0f});
  expect_fp8_cache_matches_cpu(model, head_dim);
}

INSTANTIATE_TEST_SUITE_P(HeadDims, CudaVsCpu, ::testing::Values(64, 128));

}  // namespace
}  // namespace lmx
