// lmx bench [--shape llama-2-7b | --model DIR] [--dtype fp16|bf16|fp32] [--prefill 512,8x512]
//           [--batches 1,8,32,64] [--context 512] [--steps 32] [--kv-cache-dtype auto|fp8]
//           [--graphs] [--generic] [--cublas-gemv] [--unfused-decode] [--untuned-gemm]
//           [--profile] [--json] [--tensor-parallel-degree N]
//           [--quantize dynamic_int8|smoothquant|fp8 ...]   (cli/quant_flags.h)
// Random-weight models of named shapes are made directly in GPU memory (no files). Reports the
// prefill time per prompt length (or per step of S packed prompts: SxN), the decode time per step
// per batch size, the bandwidth a decode step achieves (weights + KV read / step time) against the
// measured copy bandwidth, the peak GPU memory and the time from process start to the first token.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "args.h"
#include "commands.h"
#include "engine/core/error.h"
#include "engine/model/known_shapes.h"
#include "engine/model/model.h"
#include "engine/model/quantization.h"
#include "kernels/kv_dtype.h"
#include "quant_flags.h"
#if LMX_HAVE_CUDA_BACKEND
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/device_info.h"
#include "engine/parallel/all_reduce_timing.h"
#endif

namespace lmx::cli {
namespace {

constexpr const char* kUsage =
    "usage: lmx bench [--shape llama-2-7b | --model DIR] [--dtype fp16|bf16|fp32]\n"
    "                 [--prefill 512,4096,8x512] [--batches 1,8,32,64] [--context 512]\n"
    "                 [--steps 32] [--kv-cache-dtype auto|fp8] [--graphs] [--generic]\n"
    "                 [--cublas-gemv] [--unfused-decode] [--untuned-gemm] [--profile] [--json]\n"
    "                 [--verbose] [--tensor-parallel-degree N]\n"
    "                 [--quantize dynamic_int8|smoothquant|fp8 ...] (see below)\n"
    "\n"
    "Prefill time per prompt length and decode time per step per batch size on the GPU, with\n"
    "random weights of a named shape (made in GPU memory) or a model directory.\n"
    "\n"
    "  --prefill N,SxN            prefill steps: one prompt of N tokens, or S prompts of N tokens\n"
    "                             packed in one step (a serving prefill chunk; default 512,4096)\n"
    "  --kv-cache-dtype auto|fp8  KV cache storage: auto = the compute dtype (default), fp8 (or\n"
    "                             fp8_e4m3) = one byte per value, as option.kv_cache_dtype\n"
    "  --graphs                   capture decode steps as CUDA graphs\n"
    "  --generic                  the unfused (auto-TP) path instead of kernel injection\n"
    "  --cublas-gemv              decode projections through cuBLAS, not the GEMV kernel\n"
    "  --unfused-decode           norms, adds and activation as separate decode kernels\n"
    "  --untuned-gemm             cuBLAS's default algorithm for every GEMM\n"
    "  --profile                  per-op times of eager steps (not with --graphs)\n"
    "  --json                     JSON instead of the table\n";

// What lmx bench makes of the shared quantization flags (kQuantUsage, printed before it).
constexpr const char* kBenchQuantUsage =
    "  lmx bench --quantize smoothquant: random weights (--shape) and speed only: no calibration,\n"
    "    so not with --model or the --smoothquant-* flags\n";

Args bench_args(int argc, char** argv) {
  return Args(argc, argv,
              with_quant_flags({"--shape", "--model", "--dtype", "--prefill", "--batches",
                                "--context", "--steps", "--kv-cache-dtype",
                                "--tensor-parallel-degree"}),
              {"--json", "--verbose", "--graphs", "--generic", "--cublas-gemv", "--unfused-decode",
               "--untuned-gemm", "--profile"});
}

// The projections' quantization: the shared flags' choice (dynamic_int8, fp8), or smoothquant's
// W8A8 kernels on random weights (speed only: no calibration, no smoothing, which changes values,
// not work). A --model is quantized as it loads (dynamic_int8, fp8); smoothquant calibrates a
// checkpoint in lmx perplexity / generate.
LinearQuant bench_quant(const Args& args) {
  const QuantChoice q = quant_from_args(args);
  if (!q.smoothquant) return q.quant;
  if (args.has("--model"))
    throw_error("lmx bench --quantize smoothquant runs on random weights (--shape): calibrating a "
                "checkpoint is lmx perplexity's and lmx generate's");
  for (const char* f : {kAlphaFlag, kCalibrationFileFlag, kCalibrationSamplesFlag})
    if (args.has(f))
      throw_error("{} calibrates: lmx bench --quantize smoothquant runs on random weights "
                  "without calibration",
                  f);
  return LinearQuant{QuantKind::W8A8};
}

}  // namespace

#if LMX_HAVE_CUDA_BACKEND
namespace {

// --kv-cache-dtype: the spellings option.kv_cache_dtype takes.
kernels::KvDtype parse_kv_cache_dtype(const std::string& text) {
  if (text == "auto") return kernels::KvDtype::model;
  if (text == "fp8" || text == "fp8_e4m3") return kernels::KvDtype::fp8_e4m3;
  throw_error("--kv-cache-dtype expects auto, fp8 or fp8_e4m3, got '{}'", text);
}

using Clock = std::chrono::steady_clock;
const Clock::time_point kProcessStart = Clock::now();  // static init: close to process start

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Sequences of `context` tokens, prefilled untimed; then `steps` decode steps of all of them.
double decode_ms_per_step(Backend& b, int batch, int context, int steps, int max_step_tokens) {
  const int bs = b.kv_shape().block_size;
  const int blocks_each = (context + steps + bs - 1) / bs;
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(batch)), tokens(static_cast<size_t>(batch));
  for (int s = 0; s < batch; ++s) {
    for (int i = 0; i < blocks_each; ++i) tables[size_t(s)].push_back(s * blocks_each + i);
    for (int i = 0; i < context; ++i) tokens[size_t(s)].push_back(3 + (s * 131 + i * 17) % 1000);
  }
  std::vector<float> logits;
  for (int s = 0; s < batch; ++s)
    for (int start = 0; start < context; start += max_step_tokens) {
      const int n = std::min(max_step_tokens, context - start);
      BatchChunk c{std::span(tokens[size_t(s)]).subspan(size_t(start), size_t(n)), start,
                   tables[size_t(s)], start + n == context};
      b.forward(std::span(&c, 1), logits);
    }
  b.take_profile();  // a profile covers the decode steps only
  // A step is what serving does: the forward and a greedy draw on the device, ids back.
  std::vector<int32_t> next(size_t(batch), 7);
  std::vector<BatchChunk> chunks(static_cast<size_t>(batch));
  const std::vector<SampleSpec> greedy(size_t(batch), SampleSpec{SamplingParams{}.row(0, 0), {}});
  std::vector<SampledToken> drawn(static_cast<size_t>(batch));
  std::vector<double> times;
  for (int step = 0; step < steps; ++step) {
    for (int s = 0; s < batch; ++s)
      chunks[size_t(s)] = {std::span(&next[size_t(s)], 1), context + step, tables[size_t(s)], true};
    const auto t = Clock::now();
    b.forward_sample(chunks, greedy, drawn);
    times.push_back(ms_since(t));
    // The profile leaves out the first step: its first calls of this batch size's GEMM shapes
    // load cuBLAS kernels (lazy module loading), milliseconds that no later step pays.
    if (step == 0) b.take_profile();
    for (int s = 0; s < batch; ++s) next[size_t(s)] = drawn[size_t(s)].id;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// One prefill step of --prefill: `prompts` prompts of `tokens` tokens each ("SxN", or "N" for one).
struct PrefillShape {
  int prompts = 1, tokens = 0;
  std::string name;  // as given
  int total() const { return prompts * tokens; }
};

// --prefill: comma-separated "N" or "SxN", each count a positive integer.
std::vector<PrefillShape> parse_prefill_shapes(const std::string& text) {
  auto bad = [&]() {
    throw_error("--prefill expects comma-separated N or SxN (S prompts of N tokens), got '{}'",
                text);
  };
  auto count = [&](const std::string& digits) {
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      bad();
    const int v = std::stoi(digits);
    if (v < 1) bad();
    return v;
  };
  std::vector<PrefillShape> out;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    PrefillShape p;
    p.name = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t x = p.name.find('x');
    if (x != std::string::npos) p.prompts = count(p.name.substr(0, x));
    p.tokens = count(x == std::string::npos ? p.name : p.name.substr(x + 1));
    out.push_back(p);
    if (comma == std::string::npos) return out;
    pos = comma + 1;
  }
}

// Median of 3 prefill steps of `shape` after a warm-up; each prompt its own sequence.
double prefill_ms(Backend& b, const PrefillShape& shape) {
  const int bs = b.kv_shape().block_size, n = shape.tokens;
  const int blocks_each = (n + bs - 1) / bs;
  std::vector<std::vector<int32_t>> tables(size_t(shape.prompts)), tokens(size_t(shape.prompts));
  for (int s = 0; s < shape.prompts; ++s) {
    for (int i = 0; i < blocks_each; ++i) tables[size_t(s)].push_back(s * blocks_each + i);
    for (int i = 0; i < n; ++i) tokens[size_t(s)].push_back(3 + (s * 131 + i * 17) % 1000);
  }
  std::vector<BatchChunk> chunks;
  for (int s = 0; s < shape.prompts; ++s)
    chunks.push_back({tokens[size_t(s)], 0, tables[size_t(s)], true});
  std::vector<float> logits;
  std::vector<double> times;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t = Clock::now();
    b.forward(chunks, logits);
    if (rep > 0) times.push_back(ms_since(t));  // the first run warms up (and is not profiled)
    if (rep == 0) b.take_profile();
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

// The all-reduce timed alone over the group's GPUs, as the steps send it (`automatic`: the
// one-shot kernel for small messages where the GPUs reach each other's memory) and by NCCL alone:
// one call of each decode batch's message (batch x hidden values, the size each layer's two
// all-reduces carry) and a 256 MiB one for the bus bandwidth. The per-step figure is calls x time
// of one call, an estimate of what the step spends in all-reduce (the eager `--profile` measures
// it inside the step).
nlohmann::json all_reduce_report(int degree, const DecoderDesc& d, CudaDtype dtype,
                                  const std::vector<int>& batches) {
  const DeviceDtype dev = dtype == CudaDtype::F32   ? DeviceDtype::F32
                          : dtype == CudaDtype::F16 ? DeviceDtype::F16
                                                    : DeviceDtype::BF16;
  std::vector<size_t> counts;
  for (int b : batches) counts.push_back(size_t(b) * size_t(d.hidden_size));
  const size_t bus_bytes = size_t(256) << 20;
  counts.push_back(bus_bytes / device_dtype_bytes(dev));
  const auto steps = time_all_reduce(degree, counts, dev, 50, all_reduce_path_from_environment());
  const auto nccl = time_all_reduce(degree, counts, dev, 50, AllReducePath::nccl);
  const int calls = 2 * d.num_layers;
  nlohmann::json r;
  r["calls_per_decode_step"] = calls;
  for (size_t i = 0; i < batches.size(); ++i)
    r["decode"][std::to_string(batches[i])] = {
        {"message_bytes", steps[i].bytes},
        {"us_per_call", steps[i].us_per_call},
        {"ms_per_step", calls * steps[i].us_per_call * 1e-3},
        {"nccl_us_per_call", nccl[i].us_per_call}};
  r["bus_message_mib"] = double(steps.back().bytes) / (1 << 20);
  r["bus_bandwidth_gbps"] = steps.back().bus_gbps;
  return r;
}

namespace {

int bench_on_cuda(const Args& args, const LinearQuant& quant) {
  spdlog::set_level(args.has("--verbose") ? spdlog::level::info : spdlog::level::warn);
  if (args.has("--shape") && args.has("--model")) throw_error("give --shape or --model, not both");
  const long long degree = args.get_int("--tensor-parallel-degree").value_or(1);
  if (degree < 1 || degree > 4096)
    throw_error("--tensor-parallel-degree must be a positive rank count, got {}", degree);
  const auto prefills = parse_prefill_shapes(args.get("--prefill").value_or("512,4096"));
  const auto batches = Args::parse_int_list("--batches", args.get("--batches").value_or("1,8,32,64"));
  const int context = int(args.get_int("--context").value_or(512));
  const int steps = int(args.get_int("--steps").value_or(32));
  int max_prefill = 0, max_prompts = 0;  // tokens and prompts of the largest prefill step
  for (const PrefillShape& p : prefills) {
    max_prefill = std::max(max_prefill, p.total());
    max_prompts = std::max(max_prompts, p.prompts);
  }
  const int max_batch = *std::max_element(batches.begin(), batches.end());

  CudaBackendOptions o;
  o.dtype = parse_cuda_dtype(args.get("--dtype").value_or("fp16"));
  o.kv_dtype = parse_kv_cache_dtype(args.get("--kv-cache-dtype").value_or("auto"));
  o.max_step_tokens = std::max(max_prefill, max_batch);
  o.max_sequences = std::max(max_batch, max_prompts);
  o.cuda_graphs = args.has("--graphs");
  o.fused = !args.has("--generic");
  o.skinny_gemv = !args.has("--cublas-gemv");  // decode projections through cuBLAS
  o.fuse_decode_projections = !args.has("--unfused-decode");  // norms, adds, activation apart
  o.tune_gemms = !args.has("--untuned-gemm");  // cuBLAS's default algorithm for every GEMM
  o.profile = args.has("--profile");
  o.tensor_parallel_degree = int(degree);
  if (o.profile && o.cuda_graphs) throw_error("--profile times eager steps: leave out --graphs");
  const int bs = o.kv_block_size;
  long prefill_blocks = 0;
  for (const PrefillShape& p : prefills)
    prefill_blocks = std::max(prefill_blocks, long(p.prompts) * ((p.tokens + bs - 1) / bs));
  o.kv_blocks = std::max(long(max_batch) * ((context + steps + bs - 1) / bs), prefill_blocks);

  const std::string shape = args.get("--shape").value_or(args.has("--model") ? "" : "llama-2-7b");
  std::unique_ptr<Backend> backend;
  std::optional<LoadedModel> model;
  if (!shape.empty()) {
    backend = make_random_cuda_backend(known_shape(shape), o, 1234, quant);
  } else {
    model = load_model(args.require("--model"), quant);
    backend = make_cuda_backend(*model, o);
  }
  if (!backend) return 0;  // a process of an mpirun group other than 0: the leader has finished
  const DecoderDesc& d = backend->desc();
  const size_t elem = o.dtype == CudaDtype::F32 ? 4 : 2;
  const size_t kv_elem = size_t(kernels::kv_value_bytes(o.kv_dtype, int(elem)));
  // Bytes of weights a decode step reads: every layer's projections and the LM head.
  // Quantized projections: a byte a weight plus a 4-byte scale a row.
  const auto linear_bytes = [&](int64_t out_rows, int64_t in_cols, bool one_byte) {
    return one_byte ? double(out_rows) * (double(in_cols) + 4.0)
                    : double(out_rows) * double(in_cols) * double(elem);
  };
  // smoothquant and fp8 keep the LM head in 16 bits.
  double weight_bytes = linear_bytes(d.vocab_size, d.embed_dim,
                                     quant.quantized() && !quant.quantizes_activations());
  for (const LayerWeightRefs& L : describe_weights(d).layers)
    for (const LinearRef* l : {&L.qkv, &L.o, &L.up, &L.down}) weight_bytes += linear_bytes(l->out, l->in, quant.quantized());

  nlohmann::json out;
  out["device"] = cuda_device_name();
  out["shape"] = shape.empty() ? args.require("--model") : shape;
  out["dtype"] = args.get("--dtype").value_or("fp16");
  out["kv_cache_dtype"] = backend->kv_cache_dtype_name();
  out["context"] = context;
  out["cuda_graphs"] = o.cuda_graphs;
  out["path"] = o.fused ? "kernel_injection" : "generic";
  out["quantize"] = args.get(kQuantizeFlag).value_or("none");
  out["tensor_parallel_degree"] = degree;  // bandwidth below: per GPU (each reads 1/degree)
  out["copy_bandwidth_gbps"] = measure_copy_bandwidth_gbps();

  // Time to first token from process start: the model is in GPU memory now; one short prefill.
  {
    std::vector<int32_t> prompt = {1, 5, 9, 13}, table = {0};
    BatchChunk c{prompt, 0, table, true};
    std::vector<float> logits;
    backend->forward(std::span(&c, 1), logits);
    out["time_to_first_token_from_process_start_ms"] = ms_since(kProcessStart);
  }
  backend->take_profile();
  for (const PrefillShape& p : prefills) {
    out["prefill_ms"][p.name] = prefill_ms(*backend, p);
    if (o.profile) out["profile"]["prefill_" + p.name] = backend->take_profile();
  }
  for (int b : batches) {
    backend->take_profile();
    const double ms = decode_ms_per_step(*backend, b, context, steps, o.max_step_tokens);
    if (o.profile) out["profile"]["decode_" + std::to_string(b)] = backend->take_profile();
    const double kv_bytes =
        double(b) * (context + steps / 2) * d.num_layers * 2.0 * d.kv_size() * kv_elem;
    const double gbps = (weight_bytes + kv_bytes) / double(degree) / (ms * 1e-3) / 1e9;
    out["decode"][std::to_string(b)] = {{"ms_per_step", ms}, {"achieved_gbps", gbps},
                                        {"fraction_of_copy_bandwidth", gbps / out["copy_bandwidth_gbps"].get<double>()},
                                        {"output_tokens_per_s", b * 1e3 / ms}};
  }
  out["peak_gpu_memory_gib"] = cuda_memory_used_bytes() / 1073741824.0;
  out["weight_bytes_read_per_step"] = weight_bytes;
  if (degree > 1) out["all_reduce"] = all_reduce_report(int(degree), d, o.dtype, batches);

  if (args.has("--json")) {
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  std::printf("%s %s (KV cache %s) on %s (copy bandwidth %.0f GB/s), %s path, CUDA graphs %s\n",
              out["shape"].get<std::string>().c_str(), out["dtype"].get<std::string>().c_str(),
              out["kv_cache_dtype"].get<std::string>().c_str(),
              out["device"].get<std::string>().c_str(), out["copy_bandwidth_gbps"].get<double>(),
              out["path"].get<std::string>().c_str(), o.cuda_graphs ? "on" : "off");
  for (auto& [n, ms] : out["prefill_ms"].items())
    std::printf("prefill %5s tokens: %8.2f ms\n", n.c_str(), ms.get<double>());
  for (auto& [b, r] : out["decode"].items())
    std::printf("decode batch %3s, context %d: %7.2f ms/step, %6.0f GB/s (%.0f%% of copy), %8.0f tok/s\n",
                b.c_str(), context, r["ms_per_step"].get<double>(), r["achieved_gbps"].get<double>(),
                100 * r["fraction_of_copy_bandwidth"].get<double>(), r["output_tokens_per_s"].get<double>());
  if (o.profile)  // per op, ms per step
    for (auto& [phase, ops] : out["profile"].items()) {
      std::printf("%s:", phase.c_str());
      for (auto& [op, v] : ops.items())
        std::printf(" %s %.3f", op.c_str(), v["ms"].get<double>() / v["steps"].get<double>());
      std::printf(" (ms/step)\n");
    }
  if (degree > 1) {
    const auto& a = out["all_reduce"];
    std::printf("all-reduce alone (%lld GPUs): bus bandwidth %.0f GB/s at %.0f MiB (NCCL)\n",
                degree, a["bus_bandwidth_gbps"].get<double>(), a["bus_message_mib"].get<double>());
    for (auto& [b, r] : a["decode"].items())
      std::printf("  decode batch %3s: %zu B a call, %.1f us (NCCL alone %.1f us), x%d calls = "
                  "%.3f ms/step\n",
                  b.c_str(), r["message_bytes"].get<size_t>(), r["us_per_call"].get<double>(),
                  r["nccl_us_per_call"].get<double>(), a["calls_per_decode_step"].get<int>(),
                  r["ms_per_step"].get<double>());
  }
  std::printf("peak GPU memory %.2f GiB; first token %.0f ms after process start\n",
              out["peak_gpu_memory_gib"].get<double>(),
              out["time_to_first_token_from_process_start_ms"].get<double>());
  return 0;
}

}  // namespace
#endif

int run_bench(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::fputs(kUsage, stdout);
      std::fputs(kQuantUsage, stdout);
      std::fputs(kBenchQuantUsage, stdout);
      return 0;
    }
  // The arguments' errors come first, on every build.
  const Args args = bench_args(argc, argv);
  [[maybe_unused]] const LinearQuant quant = bench_quant(args);
#if LMX_HAVE_CUDA_BACKEND
  return bench_on_cuda(args, quant);
#else
  throw_error("lmx bench needs the CUDA backend; this build has none (configure with CUDA)");
#endif
}

}  // namespace lmx::cli
