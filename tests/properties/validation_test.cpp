// Every key's validation: invalid values name key, value, source and what is allowed; valid but
// unsupported values say so; conflicting combinations name both sides.
#include <cctype>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "properties/serving_config.h"
#include "temp_model_dir.h"

namespace {

using namespace lmx::properties;
using lmx::properties::testing::TempModelDir;

// Loads and returns the error text; records a failure when loading succeeds.
std::string error_of(const TempModelDir& dir, std::map<std::string, std::string> env = {},
                     int gpus = 0,
                     const EngineCapabilities& caps = EngineCapabilities::cpu_only()) {
  try {
    load_serving_config(dir.path(), Environment::from_map(std::move(env), gpus), caps);
  } catch (const lmx::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "configuration was accepted";
  return "";
}

ServingConfig load(const TempModelDir& dir, std::map<std::string, std::string> env, int gpus,
                   const EngineCapabilities& caps) {
  return load_serving_config(dir.path(), Environment::from_map(std::move(env), gpus), caps);
}

::testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << needle << "' not in: " << haystack;
}

struct BadValue {
  const char* key;
  const char* value;
  const char* allowed;  // a piece of the "allowed" text
};

// One invalid value per key (several for the tricky ones), checked against everything the
// configuration language allows, so that no error comes from missing engine support.
const std::vector<BadValue> kBadValues = {
    {"option.tensor_parallel_degree", "0", "a positive integer or max"},
    {"option.tensor_parallel_degree", "two", "a positive integer or max"},
    {"option.tensor_parallel_degree", "1.5", "a positive integer or max"},
    {"option.dtype", "fp8", "fp32, fp16, bf16, auto"},
    {"option.kv_cache_dtype", "fp8_e5m2", "auto, fp8, fp8_e4m3"},
    {"option.kv_cache_dtype", "int8", "auto, fp8, fp8_e4m3"},
    {"option.kv_cache_dtype", "fp16", "auto, fp8, fp8_e4m3"},
    {"option.kv_cache_dtype", "", "auto, fp8, fp8_e4m3"},
    {"option.kv_cache_scale", "0", "auto, calibrate, or a positive number"},
    {"option.kv_cache_scale", "-1", "auto, calibrate, or a positive number"},
    {"option.kv_cache_scale", "nan", "auto, calibrate, or a positive number"},
    {"option.kv_cache_scale", "inf", "auto, calibrate, or a positive number"},
    {"option.kv_cache_scale", "1e39", "auto, calibrate, or a positive number"},
    {"option.kv_cache_scale", "checkpoint", "auto, calibrate, or a positive number"},
    {"option.max_tokens", "0", "an integer >= 1"},
    {"option.max_tokens", "-5", "an integer >= 1"},
    {"option.max_tokens", "12abc", "an integer >= 1"},
    {"option.max_tokens", "99999999999999999999999", "an integer >= 1"},
    {"option.max_tokens", "", "an integer >= 1"},
    {"option.quantize", "gptq", "dynamic_int8, smoothquant"},
    {"option.quantize", "bitsandbytes", "dynamic_int8, smoothquant"},
    {"option.smoothquant_alpha", "1.5", "a number from 0 to 1"},
    {"option.smoothquant_alpha", "-0.1", "a number from 0 to 1"},
    {"option.smoothquant_alpha", "nan", "a number from 0 to 1"},
    {"option.smoothquant_alpha", "half", "a number from 0 to 1"},
    {"option.rolling_batch", "vllm", "LMX is its own engine"},
    {"option.rolling_batch", "sometimes", "auto, disable"},
    {"option.max_rolling_batch_size", "0", "an integer from 1 to"},
    {"option.max_rolling_batch_prefill_tokens", "many", "an integer >= 1"},
    {"option.enable_cuda_graph", "yes", "true, false"},
    {"option.task", "image-generation", "text-generation"},
    {"option.device", "tpu", "cpu, cuda, auto"},
    {"option.output_formatter", "xml", "json, jsonlines, sse"},
    {"option.trust_remote_code", "maybe", "true, false"},
    {"option.model_loading_timeout", "0", "an integer >= 1"},
    {"option.model_loading_timeout", "30m", "an integer >= 1"},
    {"option.request_timeout", "-1", "an integer >= 0"},
    {"option.request_timeout", "1.5s", "an integer >= 0"},
    {"job_queue_size", "0", "an integer >= 1"},
    {"batch_size", "0", "an integer from 1 to"},
    {"max_batch_delay", "-1", "an integer >= 0"},
    {"chunked_read_timeout", "0", "an integer >= 1"},
};

TEST(Validation, InvalidValueInFileNamesKeyValueLineAndAllowed) {
  for (const BadValue& b : kBadValues) {
    SCOPED_TRACE(std::string(b.key) + "=" + b.value);
    TempModelDir dir(std::string("# header\n! another comment\n") + b.key + "=" + b.value + "\n");
    const std::string e = error_of(dir, {}, 2, EngineCapabilities::everything());
    EXPECT_TRUE(contains(e, std::string("invalid value '") + b.value + "' for " + b.key));
    EXPECT_TRUE(contains(e, "line 3 of " + dir.props()));
    EXPECT_TRUE(contains(e, std::string("allowed: ")));
    EXPECT_TRUE(contains(e, b.allowed));
  }
}

TEST(Validation, InvalidValueFromEnvironmentNamesTheVariable) {
  for (const BadValue& b : kBadValues) {
    const std::string key = b.key;
    const bool option = key.rfind("option.", 0) == 0;
    std::string var = option ? "OPTION_" + key.substr(7) : "SERVING_" + key;
    for (char& ch : var) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    SCOPED_TRACE(var + "=" + b.value);
    TempModelDir dir;
    const std::string e = error_of(dir, {{var, b.value}}, 2, EngineCapabilities::everything());
    EXPECT_TRUE(contains(e, std::string("invalid value '") + b.value + "' for " + key));
    EXPECT_TRUE(contains(e, "environment variable " + var));
    EXPECT_TRUE(contains(e, b.allowed));
  }
}

TEST(Validation, InvalidAliasValueNamesTheAlias) {
  TempModelDir dir;
  const std::string e = error_of(dir, {{"HF_MODEL_QUANTIZE", "awq"}});
  EXPECT_TRUE(contains(e, "invalid value 'awq' for option.quantize"));
  EXPECT_TRUE(contains(e, "environment variable HF_MODEL_QUANTIZE (TGI alias)"));
  const std::string g = error_of(dir, {{"ENABLE_CUDA_GRAPHS", "on"}});
  EXPECT_TRUE(contains(g, "invalid value 'on' for option.enable_cuda_graph"));
  EXPECT_TRUE(contains(g, "ENABLE_CUDA_GRAPHS"));
  const std::string t = error_of(dir, {{"TENSOR_PARALLEL_DEGREE", "all"}});
  EXPECT_TRUE(contains(t, "invalid value 'all' for option.tensor_parallel_degree"));
  EXPECT_TRUE(contains(t, "environment variable TENSOR_PARALLEL_DEGREE"));
}

struct Unsupported {
  const char* key;
  const char* value;
  const char* supported;
};

// Valid LMI values this build cannot run yet (EngineCapabilities::cpu_only()).
const std::vector<Unsupported> kUnsupported = {
    {"option.dtype", "fp16", "dtype fp32, auto"},
    {"option.dtype", "bf16", "dtype fp32, auto"},
    {"option.device", "cuda", "device cpu"},
    {"option.enable_cuda_graph", "true", "enable_cuda_graph=false"},
    {"option.task", "text2text-generation", "task text-generation"},
};

TEST(Validation, ValidButUnsupportedValuesSaySo) {
  for (const Unsupported& u : kUnsupported) {
    SCOPED_TRACE(std::string(u.key) + "=" + u.value);
    TempModelDir dir(std::string(u.key) + "=" + u.value + "\n");
    const std::string e = error_of(dir, {}, 1);
    EXPECT_TRUE(contains(e, std::string(u.key) + "=" + u.value));
    EXPECT_TRUE(contains(e, "line 1 of " + dir.props()));
    EXPECT_TRUE(contains(e, "is a valid value but not supported by this build of LMX yet"));
    EXPECT_TRUE(contains(e, u.supported));
  }
}

TEST(Validation, CapabilitiesTableIsHonoured) {
  // The same value passes once the engine owners widen the table.
  TempModelDir dir("option.quantize=smoothquant\n");
  EngineCapabilities caps = EngineCapabilities::cpu_only();
  caps.quantize[Device::Cpu].erase(Quantize::SmoothQuant);
  EXPECT_FALSE(error_of(dir, {}, 0, caps).empty());
  caps.quantize[Device::Cpu].insert(Quantize::SmoothQuant);
  EXPECT_EQ(load_serving_config(dir.path(), Environment::from_map({}), caps).quantize,
            Quantize::SmoothQuant);
}

TEST(Validation, HalfPrecisionNeedsCuda) {
  TempModelDir dir("option.dtype=fp16\n");
  const std::string e = error_of(dir, {}, 0, EngineCapabilities::everything());
  EXPECT_TRUE(contains(e, "option.dtype=fp16 (from line 1 of"));
  EXPECT_TRUE(contains(e, "need option.device=cuda"));
}

TEST(Validation, DtypeAutoAndFp32AreSupportedNow) {
  for (const char* v : {"auto", "fp32", "float32"}) {
    TempModelDir dir(std::string("option.dtype=") + v + "\n");
    EXPECT_NO_THROW(load_serving_config(dir.path(), Environment::from_map({}),
                                        EngineCapabilities::cpu_only()))
        << v;
  }
}

// The whole message of a bad option.kv_cache_dtype, as a user sees it.
TEST(Validation, KvCacheDtypeErrorNamesKeyValueSourceAndAllowed) {
  TempModelDir dir("option.kv_cache_dtype=e4m3\n");
  EXPECT_EQ(error_of(dir), "invalid value 'e4m3' for option.kv_cache_dtype (from line 1 of " +
                               dir.props() + "): allowed: auto, fp8, fp8_e4m3");
  TempModelDir env_dir;
  EXPECT_EQ(error_of(env_dir, {{"OPTION_KV_CACHE_DTYPE", "FP8_E5M2"}}),
            "invalid value 'FP8_E5M2' for option.kv_cache_dtype (from environment variable "
            "OPTION_KV_CACHE_DTYPE): allowed: auto, fp8, fp8_e4m3");
}

// fp8 needs no capability: the CPU backend emulates it, the CUDA backend stores bytes.
TEST(Validation, KvCacheDtypeFp8IsSupportedOnEveryDevice) {
  TempModelDir dir("option.kv_cache_dtype=fp8\n");
  EXPECT_NO_THROW(
      load_serving_config(dir.path(), Environment::from_map({}), EngineCapabilities::cpu_only()));
  EXPECT_NO_THROW(load_serving_config(dir.path(),
                                      Environment::from_map({{"OPTION_DEVICE", "cuda"}}, 1),
                                      EngineCapabilities::everything()));
}

// option.kv_cache_scale: auto (default), calibrate or a number, and only with the fp8 cache.
TEST(Validation, KvCacheScaleTakesAutoCalibrateOrAPositiveNumber) {
  for (const auto& [text, kind, value] :
       {std::tuple{"auto", KvCacheScale::Kind::Auto, 1.0},
        std::tuple{"Calibrate", KvCacheScale::Kind::Calibrate, 1.0},
        std::tuple{"1.0", KvCacheScale::Kind::Fixed, 1.0},
        std::tuple{" 0.0625 ", KvCacheScale::Kind::Fixed, 0.0625},
        std::tuple{"16", KvCacheScale::Kind::Fixed, 16.0}}) {
    SCOPED_TRACE(text);
    TempModelDir dir(std::string("option.kv_cache_dtype=fp8\noption.kv_cache_scale=") + text +
                     "\n");
    const ServingConfig c = load(dir, {}, 0, EngineCapabilities::cpu_only());
    EXPECT_EQ(c.kv_cache_scale.kind, kind);
    EXPECT_EQ(c.kv_cache_scale.value, value);
    EXPECT_TRUE(to_json(c)["settings"]["option.kv_cache_scale"]["takes_effect"].get<bool>());
  }
  TempModelDir unset("option.kv_cache_dtype=fp8\n");
  const ServingConfig c = load(unset, {}, 0, EngineCapabilities::cpu_only());
  EXPECT_EQ(c.kv_cache_scale.kind, KvCacheScale::Kind::Auto);
  EXPECT_EQ(to_json(c)["settings"]["option.kv_cache_scale"]["value"], "auto");
}

TEST(Validation, KvCacheScaleNeedsTheFp8Cache) {
  TempModelDir dir("option.kv_cache_scale=2\n");
  const std::string e = error_of(dir);
  EXPECT_TRUE(contains(e, "option.kv_cache_scale=2 (from line 1 of")) << e;
  EXPECT_TRUE(contains(e, "only used with option.kv_cache_dtype=fp8_e4m3")) << e;
  TempModelDir env_dir;
  const std::string env_e = error_of(env_dir, {{"OPTION_KV_CACHE_SCALE", "calibrate"}});
  EXPECT_TRUE(contains(env_e, "environment variable OPTION_KV_CACHE_SCALE")) << env_e;
  // Unset, the default does not take effect without fp8 (lmx config says why).
  TempModelDir plain;
  const auto j = to_json(load(plain, {}, 0, EngineCapabilities::cpu_only()));
  EXPECT_FALSE(j["settings"]["option.kv_cache_scale"]["takes_effect"].get<bool>());
}

TEST(Validation, SmoothquantAlphaNeedsSmoothquant) {
  TempModelDir dir("option.smoothquant_alpha=0.5\n");
  const std::string e = error_of(dir, {}, 0, EngineCapabilities::everything());
  EXPECT_TRUE(contains(e, "option.smoothquant_alpha=0.5 (from line 1 of"));
  EXPECT_TRUE(contains(e, "only used with option.quantize=smoothquant"));
}

TEST(Validation, DynamicBatchingConflictsWithRollingBatch) {
  TempModelDir dir("batch_size=4\n");
  const std::string e = error_of(dir);
  EXPECT_TRUE(contains(e, "batch_size=4 (from line 1 of"));
  EXPECT_TRUE(contains(e, "option.rolling_batch=disable"));
}

TEST(Validation, CudaGraphsNeedCuda) {
  TempModelDir dir("option.enable_cuda_graph=true\noption.device=cpu\n");
  const std::string e = error_of(dir, {}, 2, EngineCapabilities::everything());
  EXPECT_TRUE(contains(e, "option.enable_cuda_graph=true"));
  EXPECT_TRUE(contains(e, "CUDA graphs need option.device=cuda"));
}

TEST(Validation, CudaNeedsAVisibleGpu) {
  TempModelDir dir;
  const std::string e =
      error_of(dir, {{"OPTION_DEVICE", "cuda"}}, 0, EngineCapabilities::everything());
  EXPECT_TRUE(contains(e, "option.device=cuda (from environment variable OPTION_DEVICE)"));
  EXPECT_TRUE(contains(e, "no GPU is visible"));
}

TEST(Validation, TensorParallelNeedsEnoughGpus) {
  TempModelDir dir;
  const auto caps = EngineCapabilities::everything();
  const std::string e = error_of(dir, {{"TENSOR_PARALLEL_DEGREE", "8"}}, 4, caps);
  EXPECT_TRUE(contains(
      e, "option.tensor_parallel_degree=8 (from environment variable TENSOR_PARALLEL_DEGREE)"));
  EXPECT_TRUE(contains(e, "only 4 GPU(s) are visible"));
}

// On cpu the degree is the CPU reference's ranks as threads.
TEST(Validation, TensorParallelOnCpuRunsRanksAsThreads) {
  TempModelDir dir;
  const ServingConfig c = load(dir, {{"TENSOR_PARALLEL_DEGREE", "3"}, {"OPTION_DEVICE", "cpu"}}, 4,
                               EngineCapabilities::everything());
  EXPECT_EQ(c.device, Device::Cpu);
  EXPECT_EQ(c.tensor_parallel_degree, 3);
}

// A CUDA degree above what the build runs names the limit.
TEST(Validation, TensorParallelBeyondTheBuildOnCuda) {
  TempModelDir dir;
  EngineCapabilities caps = EngineCapabilities::everything();
  caps.max_tensor_parallel_degree = 1;
  const std::string e = error_of(dir, {{"OPTION_TENSOR_PARALLEL_DEGREE", "2"}}, 4, caps);
  EXPECT_TRUE(contains(e, "option.tensor_parallel_degree=2"));
  EXPECT_TRUE(contains(e, "not supported by this build of LMX yet"));
  EXPECT_TRUE(contains(e, "up to 1 on cuda"));
}

// SageMaker sets SM_NUM_GPUS on every GPU host: a degree from that alias alone shrinks to what
// can run (noted, warned) and never stops the host from starting.
TEST(Validation, SmNumGpusNeverFailsAMultiGpuHost) {
  TempModelDir dir;
  EngineCapabilities caps = EngineCapabilities::everything();
  const ServingConfig fewer = load(dir, {{"SM_NUM_GPUS", "8"}}, 4, caps);
  EXPECT_EQ(fewer.tensor_parallel_degree, 4);
  EXPECT_TRUE(contains(fewer.source_of("option.tensor_parallel_degree").note, "using degree 4"));
  EXPECT_FALSE(fewer.warnings.empty());
  caps.max_tensor_parallel_degree = 1;
  const ServingConfig unbuilt = load(dir, {{"SM_NUM_GPUS", "8"}}, 8, caps);
  EXPECT_EQ(unbuilt.tensor_parallel_degree, 1);
  const ServingConfig cpu = load(dir, {{"SM_NUM_GPUS", "8"}, {"OPTION_DEVICE", "cpu"}}, 8, caps);
  EXPECT_EQ(cpu.tensor_parallel_degree, 1);
}

TEST(Validation, AllErrorsAreReportedTogether) {
  TempModelDir dir("option.dtype=fp9\noption.max_tokens=none\noption.output_formatter=xml\n");
  const std::string e = error_of(dir);
  EXPECT_TRUE(contains(e, "3 configuration errors"));
  EXPECT_TRUE(contains(e, "'fp9' for option.dtype"));
  EXPECT_TRUE(contains(e, "'none' for option.max_tokens"));
  EXPECT_TRUE(contains(e, "'xml' for option.output_formatter"));
}

TEST(Validation, ValidEdgeValuesAreAccepted) {
  TempModelDir dir(
      "option.max_tokens=+8\n"
      "max_batch_delay=0\n"
      "option.smoothquant_alpha=0\n"
      "option.quantize=smoothquant\n"
      "option.trust_remote_code=False\n"
      "option.rolling_batch=disable\n"
      "batch_size=2\n");
  const ServingConfig c =
      load_serving_config(dir.path(), Environment::from_map({}), EngineCapabilities::everything());
  EXPECT_EQ(c.max_tokens, 8);
  EXPECT_EQ(c.max_batch_delay_ms, 0);
  ASSERT_TRUE(c.smoothquant_alpha.has_value());
  EXPECT_EQ(*c.smoothquant_alpha, 0.0);
  EXPECT_FALSE(c.trust_remote_code);
  EXPECT_EQ(c.batch_size, 2);
}

}  // namespace

namespace {

// option.max_replicas: as many as fit by default (visible GPUs / degree on cuda, 1 on cpu, 1 in
// a process started by mpirun: its group is one replica); more than the GPUs hold is an error
// naming the numbers; on cpu any count runs.
TEST(Validation, ReplicasFitTheGpus) {
  TempModelDir dir;
  const auto caps = EngineCapabilities::everything();
  EXPECT_EQ(load(dir, {}, 8, caps).max_replicas, 8);
  EXPECT_EQ(load(dir, {{"TENSOR_PARALLEL_DEGREE", "2"}}, 8, caps).max_replicas, 4);
  EXPECT_EQ(load(dir, {{"TENSOR_PARALLEL_DEGREE", "3"}}, 8, caps).max_replicas, 2);
  for (const char* size : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const ServingConfig c = load(dir, {{"TENSOR_PARALLEL_DEGREE", "2"}, {size, "2"}}, 4, caps);
    EXPECT_EQ(c.max_replicas, 1) << size;
  }
  EXPECT_EQ(load(dir, {{"TENSOR_PARALLEL_DEGREE", "2"}, {"OMPI_COMM_WORLD_SIZE", "1"}}, 4, caps)
                .max_replicas,
            2);
  EXPECT_EQ(load(dir, {}, 0, caps).max_replicas, 1);
  EXPECT_EQ(load(dir, {{"OPTION_MAX_REPLICAS", "3"}, {"OPTION_DEVICE", "cpu"}}, 0, caps).max_replicas,
            3);
  const std::string e =
      error_of(dir, {{"OPTION_MAX_REPLICAS", "3"}, {"TENSOR_PARALLEL_DEGREE", "2"}}, 4, caps);
  EXPECT_TRUE(contains(e, "3 replicas of tensor_parallel_degree 2 need 6 GPUs; 4 are visible"));
  EXPECT_TRUE(contains(error_of(dir, {{"OPTION_MAX_REPLICAS", "0"}}, 1, caps), "a positive integer"));
}

}  // namespace

namespace {

// A value holding a NUL byte (or other control bytes) is quoted escaped, so the message names the
// key and the line in full wherever it crosses a C string; a huge value is quoted in part.
TEST(Validation, ControlBytesAndHugeValuesAreQuotedSafely) {
  TempModelDir dir(std::string("option.dtype=fp1\0x\n", 19));
  const std::string e = error_of(dir);
  EXPECT_EQ(e.find('\0'), std::string::npos);
  EXPECT_TRUE(contains(e, "'fp1\\x00x'"));
  EXPECT_TRUE(contains(e, "option.dtype"));
  EXPECT_TRUE(contains(e, "line 1"));
  const std::string huge(1 << 20, 'a');
  const std::string h = error_of(dir, {{"OPTION_MAX_TOKENS", huge}});
  EXPECT_LT(h.size(), 2000u);
  EXPECT_TRUE(contains(h, "(1048576 bytes)"));
}
}  // namespace
