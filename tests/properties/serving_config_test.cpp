// load_serving_config: defaults, precedence between sources, `max` TP, model_id resolution,
// warnings and the JSON report.
#include "properties/serving_config.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "engine/core/error.h"
#include "temp_model_dir.h"

namespace {

// Warnings are asserted through ServingConfig::warnings; keep the test log readable.
[[maybe_unused]] const bool kQuietLog = [] {
  spdlog::set_level(spdlog::level::err);
  return true;
}();

using namespace lmx::properties;
using lmx::properties::testing::TempModelDir;
using Kind = ValueSource::Kind;

ServingConfig load(const TempModelDir& dir, std::map<std::string, std::string> env = {},
                   int gpus = 0, const EngineCapabilities& caps = EngineCapabilities::cpu_only(),
                   const std::vector<Override>& overrides = {}) {
  return load_serving_config(dir.path(), Environment::from_map(std::move(env), gpus), caps,
                             overrides);
}

bool has_warning(const ServingConfig& c, const std::string& needle) {
  for (const std::string& w : c.warnings)
    if (w.find(needle) != std::string::npos) return true;
  return false;
}

::testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << needle << "' not in: " << haystack;
}

TEST(ServingConfig, LmiDefaultsWithoutAnyConfiguration) {
  TempModelDir dir;
  const ServingConfig c = load(dir);
  EXPECT_EQ(c.model_dir, dir.path());
  EXPECT_EQ(c.model_path, dir.path());
  EXPECT_EQ(c.model_id, "");
  EXPECT_EQ(c.tensor_parallel_degree, 1);
  EXPECT_EQ(c.dtype, Dtype::Auto);
  EXPECT_EQ(c.kv_cache_dtype, KvCacheDtype::Auto);
  EXPECT_EQ(c.max_tokens, 1024);
  EXPECT_EQ(c.quantize, Quantize::None);
  EXPECT_FALSE(c.smoothquant_alpha.has_value());
  EXPECT_EQ(c.rolling_batch, RollingBatch::Auto);
  EXPECT_EQ(c.max_rolling_batch_size, 256);
  EXPECT_EQ(c.max_rolling_batch_prefill_tokens, 4096);
  EXPECT_FALSE(c.enable_cuda_graph);
  EXPECT_EQ(c.task, "text-generation");
  EXPECT_EQ(c.device, Device::Cpu);
  EXPECT_EQ(c.output_formatter, OutputFormatter::Json);
  EXPECT_FALSE(c.trust_remote_code);
  EXPECT_EQ(c.model_loading_timeout_s, 1800);
  EXPECT_EQ(c.request_timeout_s, 0);  // no deadline unless asked for
  EXPECT_EQ(c.max_stream_buffer_bytes, 1 << 20);
  EXPECT_EQ(c.job_queue_size, 1000);
  EXPECT_EQ(c.batch_size, 1);
  EXPECT_EQ(c.max_batch_delay_ms, 100);
  EXPECT_EQ(c.chunked_read_timeout_s, 60);
  EXPECT_TRUE(c.warnings.empty());
  for (const std::string& key : known_keys()) {
    EXPECT_EQ(c.source_of(key).kind, Kind::Default) << key;
    EXPECT_EQ(c.source_of(key).describe(), "default") << key;
  }
  EXPECT_THROW(c.source_of("option.nonsense"), lmx::Error);
}

TEST(ServingConfig, ValuesFromFileRememberTheirLine) {
  TempModelDir dir(
      "engine=Python\n"
      "# comment\n"
      "option.max_tokens = 2048\n"
      "option.output_formatter: jsonlines\n"
      "job_queue_size 7\n"
      "option.max_rolling_batch_size=4\n");
  const ServingConfig c = load(dir);
  EXPECT_EQ(c.max_tokens, 2048);
  EXPECT_EQ(c.output_formatter, OutputFormatter::JsonLines);
  EXPECT_EQ(c.job_queue_size, 7);
  const ValueSource& s = c.source_of("option.max_tokens");
  EXPECT_EQ(s.kind, Kind::File);
  EXPECT_EQ(s.line, 3);
  EXPECT_EQ(s.name, dir.props());
  EXPECT_EQ(s.raw, "2048");
  EXPECT_EQ(s.describe(), "line 3 of " + dir.props());
  EXPECT_EQ(c.source_of("job_queue_size").line, 5);
}

TEST(ServingConfig, FileWinsOverOptionEnvironment) {
  TempModelDir dir("option.max_tokens=300\n");
  const ServingConfig c =
      load(dir, {{"OPTION_MAX_TOKENS", "500"}, {"OPTION_MAX_ROLLING_BATCH_SIZE", "9"}});
  EXPECT_EQ(c.max_tokens, 300);
  EXPECT_EQ(c.source_of("option.max_tokens").kind, Kind::File);
  EXPECT_EQ(c.max_rolling_batch_size, 9);
  EXPECT_EQ(c.source_of("option.max_rolling_batch_size").kind, Kind::Environment);
  EXPECT_EQ(c.source_of("option.max_rolling_batch_size").name, "OPTION_MAX_ROLLING_BATCH_SIZE");
}

TEST(ServingConfig, FileKeyCaseDoesNotDefeatPrecedence) {
  TempModelDir dir("option.Max_Tokens=300\n");
  const ServingConfig c = load(dir, {{"OPTION_MAX_TOKENS", "500"}});
  EXPECT_EQ(c.max_tokens, 300);
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ServingConfig, ServingVariablesSetServerKeys) {
  TempModelDir dir;
  const ServingConfig c = load(dir, {{"SERVING_JOB_QUEUE_SIZE", "12"},
                                     {"SERVING_MAX_BATCH_DELAY", "0"}});
  EXPECT_EQ(c.job_queue_size, 12);
  EXPECT_EQ(c.max_batch_delay_ms, 0);
  EXPECT_EQ(c.source_of("job_queue_size").describe(),
            "environment variable SERVING_JOB_QUEUE_SIZE");
  EXPECT_EQ(c.chunked_read_timeout_s, 60);
}

// Settings never silently ignored: chunked_read_timeout (no chunk timeout on streamed responses
// yet) is refused when set, and lmx config says, for every key, whether it takes effect.
TEST(ServingConfig, SettingsWithoutEffectAreRefusedOrReported) {
  TempModelDir dir;
  try {
    load(dir, {{"SERVING_CHUNKED_READ_TIMEOUT", "5"}});
    ADD_FAILURE() << "chunked_read_timeout was accepted";
  } catch (const lmx::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("chunked_read_timeout=5 (from environment variable "
                        "SERVING_CHUNKED_READ_TIMEOUT): chunked_read_timeout is not supported"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("remove the setting"), std::string::npos) << what;
  }
  const nlohmann::json rolling = to_json(load(dir, {{"SERVING_BATCH_SIZE", "1"}}));
  for (const auto& [key, entry] : rolling["settings"].items())
    EXPECT_TRUE(entry.contains("takes_effect")) << key;
  EXPECT_FALSE(rolling["settings"]["batch_size"]["takes_effect"]);
  EXPECT_FALSE(rolling["settings"]["max_batch_delay"]["takes_effect"]);
  EXPECT_TRUE(rolling["settings"]["option.max_rolling_batch_size"]["takes_effect"]);
  EXPECT_FALSE(rolling["settings"]["option.revision"]["takes_effect"]);
  const nlohmann::json dynamic =
      to_json(load(dir, {{"OPTION_ROLLING_BATCH", "disable"}, {"SERVING_BATCH_SIZE", "4"}}));
  EXPECT_TRUE(dynamic["settings"]["batch_size"]["takes_effect"]);
  EXPECT_FALSE(dynamic["settings"]["option.max_rolling_batch_size"]["takes_effect"]);
}

TEST(ServingConfig, AliasesApplyBelowLmiVariables) {
  TempModelDir dir;
  const ServingConfig c = load(dir, {{"MAX_BATCH_SIZE", "16"},
                                     {"MAX_CONCURRENT_REQUESTS", "33"},
                                     {"SERVING_JOB_QUEUE_SIZE", "44"},
                                     {"MAX_TOTAL_TOKENS", "777"}});
  EXPECT_EQ(c.max_rolling_batch_size, 16);
  EXPECT_EQ(c.source_of("option.max_rolling_batch_size").kind, Kind::Alias);
  EXPECT_EQ(c.source_of("option.max_rolling_batch_size").describe(),
            "environment variable MAX_BATCH_SIZE (TGI alias)");
  EXPECT_EQ(c.job_queue_size, 44);  // SERVING_* beats the alias
  EXPECT_EQ(c.source_of("job_queue_size").name, "SERVING_JOB_QUEUE_SIZE");
  EXPECT_EQ(c.max_tokens, 777);
}

TEST(ServingConfig, FileWinsOverAliases) {
  TempModelDir dir("job_queue_size=5\n");
  const ServingConfig c = load(dir, {{"MAX_CONCURRENT_REQUESTS", "33"}});
  EXPECT_EQ(c.job_queue_size, 5);
}

TEST(ServingConfig, OptionVariableWinsOverNamedVariable) {
  TempModelDir dir;
  const auto a = dir.mkdir("a");
  const auto b = dir.mkdir("b");
  const ServingConfig c = load(dir, {{"OPTION_MODEL_ID", a.string()}, {"HF_MODEL_ID", b.string()}});
  EXPECT_EQ(c.model_path, a);
  EXPECT_EQ(c.source_of("option.model_id").name, "OPTION_MODEL_ID");
}

TEST(ServingConfig, NamedTensorParallelWinsOverSmNumGpus) {
  TempModelDir dir;
  const ServingConfig c = load(dir, {{"TENSOR_PARALLEL_DEGREE", "2"}, {"SM_NUM_GPUS", "4"}}, 4,
                               EngineCapabilities::everything());
  EXPECT_EQ(c.tensor_parallel_degree, 2);
  EXPECT_EQ(c.source_of("option.tensor_parallel_degree").name, "TENSOR_PARALLEL_DEGREE");
  const ServingConfig d = load(dir, {{"SM_NUM_GPUS", "4"}}, 4, EngineCapabilities::everything());
  EXPECT_EQ(d.tensor_parallel_degree, 4);
  EXPECT_EQ(d.source_of("option.tensor_parallel_degree").kind, Kind::Alias);
}

TEST(ServingConfig, OverridesWinOverEverything) {
  TempModelDir dir("option.max_tokens=300\n");
  const ServingConfig c =
      load(dir, {{"OPTION_MAX_TOKENS", "500"}}, 0, EngineCapabilities::cpu_only(),
           {{"option.max_tokens", "64", "plugin override"}});
  EXPECT_EQ(c.max_tokens, 64);
  EXPECT_EQ(c.source_of("option.max_tokens").kind, Kind::Override);
  EXPECT_EQ(c.source_of("option.max_tokens").describe(), "plugin override");
}

TEST(ServingConfig, DuplicateKeyInFileWarnsAndLastWins) {
  TempModelDir dir("option.max_tokens=1\noption.max_tokens=2\n");
  const ServingConfig c = load(dir);
  EXPECT_EQ(c.max_tokens, 2);
  EXPECT_EQ(c.source_of("option.max_tokens").line, 2);
  EXPECT_TRUE(has_warning(c, "option.max_tokens is set 2 times"));
}

TEST(ServingConfig, ValuesAreTrimmedAndCaseInsensitive) {
  TempModelDir dir(
      "option.dtype = FP32   \noption.rolling_batch=Auto\noption.enable_cuda_graph=FALSE\n");
  const ServingConfig c = load(dir);
  EXPECT_EQ(c.dtype, Dtype::Fp32);
  EXPECT_EQ(c.source_of("option.dtype").raw, "FP32   ");
  EXPECT_EQ(c.rolling_batch, RollingBatch::Auto);
  EXPECT_FALSE(c.enable_cuda_graph);
}

TEST(ServingConfig, KvCacheDtypeSpellings) {
  const std::vector<std::pair<std::string, KvCacheDtype>> cases = {
      {"auto", KvCacheDtype::Auto},        {"AUTO", KvCacheDtype::Auto},
      {"fp8", KvCacheDtype::Fp8E4m3},      {" FP8 ", KvCacheDtype::Fp8E4m3},
      {"fp8_e4m3", KvCacheDtype::Fp8E4m3}, {"Fp8_E4M3\t", KvCacheDtype::Fp8E4m3}};
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    TempModelDir dir("option.kv_cache_dtype=" + text + "\n");
    const ServingConfig c = load(dir);
    EXPECT_EQ(c.kv_cache_dtype, want);
    EXPECT_EQ(c.source_of("option.kv_cache_dtype").kind, Kind::File);
    EXPECT_EQ(to_json(c)["settings"]["option.kv_cache_dtype"]["value"],
              want == KvCacheDtype::Auto ? "auto" : "fp8_e4m3");  // canonical spelling
  }
}

TEST(ServingConfig, KvCacheDtypeFromEnvironmentAndFileWins) {
  TempModelDir dir;
  const ServingConfig c = load(dir, {{"OPTION_KV_CACHE_DTYPE", "fp8"}});
  EXPECT_EQ(c.kv_cache_dtype, KvCacheDtype::Fp8E4m3);
  EXPECT_EQ(c.source_of("option.kv_cache_dtype").kind, Kind::Environment);
  EXPECT_EQ(c.source_of("option.kv_cache_dtype").describe(),
            "environment variable OPTION_KV_CACHE_DTYPE");
  // The CPU backend emulates fp8 storage; the report says so.
  EXPECT_TRUE(contains(c.source_of("option.kv_cache_dtype").note, "emulated on cpu"));
  EXPECT_TRUE(c.warnings.empty());

  TempModelDir file("option.kv_cache_dtype=auto\n");
  const ServingConfig f = load(file, {{"OPTION_KV_CACHE_DTYPE", "fp8"}});
  EXPECT_EQ(f.kv_cache_dtype, KvCacheDtype::Auto);
  EXPECT_EQ(f.source_of("option.kv_cache_dtype").kind, Kind::File);
}

TEST(ServingConfig, MaxTensorParallelIsAllVisibleGpus) {
  TempModelDir dir;
  const ServingConfig c =
      load(dir, {{"TENSOR_PARALLEL_DEGREE", "max"}}, 4, EngineCapabilities::everything());
  EXPECT_EQ(c.device, Device::Cuda);
  EXPECT_EQ(c.tensor_parallel_degree, 4);
  EXPECT_EQ(c.source_of("option.tensor_parallel_degree").raw, "max");
  EXPECT_TRUE(contains(c.source_of("option.tensor_parallel_degree").note, "4 visible GPU"));

  const ServingConfig eight =
      load(dir, {{"TENSOR_PARALLEL_DEGREE", "MAX"}}, 8, EngineCapabilities::everything());
  EXPECT_EQ(eight.tensor_parallel_degree, 8);
}

TEST(ServingConfig, MaxTensorParallelOnCpuIsOne) {
  TempModelDir dir("option.tensor_parallel_degree=max\n");
  const ServingConfig c = load(dir, {}, 0, EngineCapabilities::everything());
  EXPECT_EQ(c.device, Device::Cpu);
  EXPECT_EQ(c.tensor_parallel_degree, 1);
  // This build has no CUDA: `max` on a GPU host still resolves for the device actually used.
  const ServingConfig d = load(dir, {}, 4);
  EXPECT_EQ(d.device, Device::Cpu);
  EXPECT_EQ(d.tensor_parallel_degree, 1);
  EXPECT_TRUE(has_warning(d, "4 GPU(s) are visible but this build of LMX cannot use CUDA yet"));
}

TEST(ServingConfig, MaxTensorParallelBeyondCapabilitiesIsUnsupported) {
  TempModelDir dir;
  EngineCapabilities caps = EngineCapabilities::everything();
  caps.max_tensor_parallel_degree = 2;
  try {
    load(dir, {{"TENSOR_PARALLEL_DEGREE", "max"}}, 4, caps);
    FAIL() << "expected an error";
  } catch (const lmx::Error& e) {
    EXPECT_TRUE(contains(e.what(), "option.tensor_parallel_degree=max"));
    EXPECT_TRUE(contains(e.what(), "not supported by this build of LMX yet"));
    EXPECT_TRUE(contains(e.what(), "up to 2"));
  }
}

TEST(ServingConfig, DeviceAutoPicksCudaOnlyWhenUsable) {
  TempModelDir dir;
  EXPECT_EQ(load(dir, {}, 2, EngineCapabilities::everything()).device, Device::Cuda);
  EXPECT_EQ(load(dir, {}, 0, EngineCapabilities::everything()).device, Device::Cpu);
  const ServingConfig c = load(dir, {}, 2, EngineCapabilities::cpu_only());
  EXPECT_EQ(c.device, Device::Cpu);
  EXPECT_TRUE(contains(c.source_of("option.device").note, "no CUDA backend yet"));
}

TEST(ServingConfig, ModelIdRelativeAndAbsolute) {
  TempModelDir dir("option.model_id=weights\n");
  const auto weights = dir.mkdir("weights");
  const ServingConfig c = load(dir);
  EXPECT_EQ(c.model_id, "weights");
  EXPECT_EQ(c.model_path, weights);

  TempModelDir other;
  const ServingConfig d = load(other, {{"HF_MODEL_ID", weights.string()}});
  EXPECT_EQ(d.model_path, weights);
  EXPECT_EQ(d.source_of("option.model_id").describe(), "environment variable HF_MODEL_ID");
}

TEST(ServingConfig, ModelIdMustBeALocalDirectory) {
  struct Case {
    const char* model_id;
    const char* expect;
  };
  const Case cases[] = {
      {"s3://bucket/prefix", "does not download models"},
      {"meta-llama/Llama-2-7b-hf", "Hugging Face Hub ids are not downloaded"},
      {"/nonexistent/lmx/model", "directory /nonexistent/lmx/model does not exist"},
  };
  for (const Case& k : cases) {
    TempModelDir dir(std::string("\noption.model_id=") + k.model_id + "\n");
    try {
      load(dir);
      ADD_FAILURE() << "no error for " << k.model_id;
    } catch (const lmx::Error& e) {
      EXPECT_TRUE(contains(e.what(), k.expect));
      EXPECT_TRUE(contains(e.what(), "option.model_id"));
      EXPECT_TRUE(contains(e.what(), std::string("option.model_id=") + k.model_id));
      EXPECT_TRUE(contains(e.what(), "line 2 of " + dir.props()));
    }
  }
}

TEST(ServingConfig, MissingModelDirectoryIsAnError) {
  try {
    load_serving_config("/nonexistent/lmx/model_dir", Environment::from_map({}),
                        EngineCapabilities::cpu_only());
    FAIL() << "expected an error";
  } catch (const lmx::Error& e) {
    EXPECT_TRUE(contains(e.what(), "/nonexistent/lmx/model_dir"));
  }
}

TEST(ServingConfig, UnknownKeysWarnWithSuggestions) {
  TempModelDir dir(
      "option.max_tokens=10\n"
      "max_rolling_batch_size=4\n"
      "option.dtyp=fp32\n"
      "option.paged_attention=true\n");
  const ServingConfig c = load(dir, {{"SERVING_FROBNICATE", "1"}});
  EXPECT_TRUE(has_warning(c, "unknown key max_rolling_batch_size (from line 2 of " + dir.props() +
                                 ") is ignored; did you mean option.max_rolling_batch_size?"));
  EXPECT_TRUE(has_warning(c, "unknown key option.dtyp (from line 3"));
  EXPECT_TRUE(has_warning(c, "did you mean option.dtype?"));
  EXPECT_TRUE(has_warning(c, "unknown key option.paged_attention"));
  EXPECT_TRUE(
      has_warning(c, "unknown key frobnicate (from environment variable SERVING_FROBNICATE)"));
  EXPECT_EQ(c.unknown.at("option.paged_attention"), "true");
  EXPECT_EQ(c.unknown.at("max_rolling_batch_size"), "4");
  EXPECT_EQ(c.unknown.size(), 4u);
  EXPECT_EQ(c.max_rolling_batch_size, 256);  // the misspelt key changed nothing
}

TEST(ServingConfig, MeaninglessAndIgnoredKeysWarn) {
  TempModelDir dir(
      "engine=MPI\n"
      "option.entryPoint=djl_python.huggingface\n"
      "option.trust_remote_code=true\n"
      "option.revision=abc123\n");
  const ServingConfig c = load(dir, {{"SERVING_LOAD_MODELS", "test::MPI=/opt/ml/model"}});
  EXPECT_TRUE(has_warning(c,
                          "load_models=test::MPI=/opt/ml/model (from environment variable "
                          "SERVING_LOAD_MODELS) is ignored"));
  EXPECT_TRUE(c.trust_remote_code);
  EXPECT_TRUE(has_warning(c, "trust_remote_code=true is accepted but meaningless"));
  EXPECT_TRUE(has_warning(c, "engine=MPI (from line 1 of"));
  EXPECT_TRUE(has_warning(c, "option.entryPoint=djl_python.huggingface"));
  EXPECT_TRUE(has_warning(c, "option.revision=abc123"));
  EXPECT_EQ(c.revision, "abc123");
  EXPECT_TRUE(c.unknown.empty());
}

TEST(ServingConfig, QueueSmallerThanBatchWarns) {
  TempModelDir dir("job_queue_size=8\noption.max_rolling_batch_size=64\n");
  EXPECT_TRUE(has_warning(load(dir), "larger than job_queue_size"));
}

TEST(ServingConfig, WiderCapabilitiesAcceptEverything) {
  TempModelDir dir(
      "option.dtype=bf16\n"
      "option.kv_cache_dtype=fp8\n"
      "option.quantize=smoothquant\n"
      "option.smoothquant_alpha=0.75\n"
      "option.tensor_parallel_degree=2\n"
      "option.enable_cuda_graph=true\n"
      "option.device=cuda\n"
      "option.output_formatter=sse\n"
      "option.rolling_batch=disable\n"
      "batch_size=4\n");
  const ServingConfig c = load(dir, {}, 2, EngineCapabilities::everything());
  EXPECT_EQ(c.dtype, Dtype::Bf16);
  EXPECT_EQ(c.kv_cache_dtype, KvCacheDtype::Fp8E4m3);
  EXPECT_EQ(c.quantize, Quantize::SmoothQuant);
  ASSERT_TRUE(c.smoothquant_alpha.has_value());
  EXPECT_DOUBLE_EQ(*c.smoothquant_alpha, 0.75);
  EXPECT_EQ(c.tensor_parallel_degree, 2);
  EXPECT_TRUE(c.enable_cuda_graph);
  EXPECT_EQ(c.device, Device::Cuda);
  EXPECT_EQ(c.output_formatter, OutputFormatter::Sse);
  EXPECT_EQ(c.rolling_batch, RollingBatch::Disable);
  EXPECT_EQ(c.batch_size, 4);
}

TEST(ServingConfig, JsonReportHasValueAndSourcePerKey) {
  TempModelDir dir("\noption.max_tokens=2048\nfoo=bar\n");
  const ServingConfig c = load(dir, {{"OPTION_DTYPE", "fp32"}, {"MAX_BATCH_SIZE", "8"}});
  const nlohmann::json j = to_json(c);
  EXPECT_EQ(j["model_dir"], dir.path().string());
  EXPECT_EQ(j["model_path"], dir.path().string());
  const auto& s = j["settings"];
  ASSERT_EQ(s.size(), known_keys().size());
  EXPECT_EQ(s["option.max_tokens"]["value"], 2048);
  EXPECT_EQ(s["option.max_tokens"]["source"], "file");
  EXPECT_EQ(s["option.max_tokens"]["origin"], dir.props());
  EXPECT_EQ(s["option.max_tokens"]["line"], 2);
  EXPECT_EQ(s["option.dtype"]["value"], "fp32");
  EXPECT_EQ(s["option.dtype"]["source"], "environment");
  EXPECT_EQ(s["option.dtype"]["origin"], "OPTION_DTYPE");
  EXPECT_EQ(s["option.max_rolling_batch_size"]["value"], 8);
  EXPECT_EQ(s["option.max_rolling_batch_size"]["source"], "alias");
  EXPECT_EQ(s["job_queue_size"]["value"], 1000);
  EXPECT_EQ(s["job_queue_size"]["source"], "default");
  EXPECT_FALSE(s["job_queue_size"].contains("origin"));
  EXPECT_TRUE(s["option.quantize"]["value"].is_null());
  EXPECT_TRUE(s["option.smoothquant_alpha"]["value"].is_null());
  EXPECT_EQ(s["option.device"]["value"], "cpu");
  EXPECT_EQ(s["option.kv_cache_dtype"]["value"], "auto");
  EXPECT_EQ(s["option.kv_cache_dtype"]["source"], "default");
  EXPECT_EQ(s["option.model_id"]["value"], dir.path().string());
  EXPECT_EQ(j["unknown"]["foo"], "bar");
  ASSERT_EQ(j["warnings"].size(), c.warnings.size());
  EXPECT_TRUE(contains(j["warnings"][0].get<std::string>(), "unknown key foo"));
}

}  // namespace

TEST(ServingConfig, ChatTemplateFileAndToolCallParser) {
  TempModelDir dir("option.chat_template=chat.jinja\noption.tool_call_parser=Hermes\n");
  dir.write("chat.jinja", "{{ messages }}");
  const ServingConfig c = load(dir);
  EXPECT_EQ(c.chat_template, (dir.path() / "chat.jinja").string());  // relative to the model dir
  EXPECT_EQ(c.tool_call_parser, "hermes");
  EXPECT_EQ(to_json(c)["settings"]["option.tool_call_parser"]["value"], "hermes");
  TempModelDir plain("");
  EXPECT_TRUE(load(plain).chat_template.empty());
  EXPECT_EQ(to_json(load(plain))["settings"]["option.tool_call_parser"]["value"], "auto");
  TempModelDir bad("option.chat_template=missing.jinja\noption.tool_call_parser=pythonic\n");
  try {
    load(bad);
    FAIL() << "accepted";
  } catch (const lmx::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("option.chat_template=missing.jinja"), std::string::npos) << m;
    EXPECT_NE(m.find("is not a file"), std::string::npos) << m;
    EXPECT_NE(m.find("auto (from the chat template), hermes, llama3_json, mistral"),
              std::string::npos) << m;
  }
}

// The plugin's bound on one stream's chunks waiting for a slow callback (plugin/stream_delivery.h).
TEST(ServingConfig, MaxStreamBufferBytes) {
  TempModelDir dir("option.max_stream_buffer_bytes=4096\n");
  const ServingConfig c = load(dir);
  EXPECT_EQ(c.max_stream_buffer_bytes, 4096);
  EXPECT_EQ(to_json(c)["settings"]["option.max_stream_buffer_bytes"]["value"], 4096);
  EXPECT_TRUE(to_json(c)["settings"]["option.max_stream_buffer_bytes"]["takes_effect"]);
  TempModelDir zero("option.max_stream_buffer_bytes=0\n");
  try {
    load(zero);
    FAIL() << "accepted 0";
  } catch (const lmx::Error& e) {
    EXPECT_TRUE(contains(e.what(), "invalid value '0' for option.max_stream_buffer_bytes"));
    EXPECT_TRUE(contains(e.what(), "an integer >= 1"));
  }
}

// Each request's deadline (engine/api/engine.h): from the file or OPTION_REQUEST_TIMEOUT, 0 = none,
// reported by lmx config like every key.
TEST(ServingConfig, RequestTimeout) {
  TempModelDir dir("option.request_timeout=30\n");
  const ServingConfig c = load(dir);
  EXPECT_EQ(c.request_timeout_s, 30);
  const auto entry = to_json(c)["settings"]["option.request_timeout"];
  EXPECT_EQ(entry["value"], 30);
  EXPECT_EQ(entry["source"], "file");
  EXPECT_TRUE(entry["takes_effect"]);
  TempModelDir plain;
  const ServingConfig from_env = load(plain, {{"OPTION_REQUEST_TIMEOUT", "7"}});
  EXPECT_EQ(from_env.request_timeout_s, 7);
  EXPECT_EQ(from_env.source_of("option.request_timeout").name, "OPTION_REQUEST_TIMEOUT");
  EXPECT_EQ(to_json(load(plain))["settings"]["option.request_timeout"]["value"], 0);
  TempModelDir bad("option.request_timeout=ten\n");
  try {
    load(bad);
    FAIL() << "accepted 'ten'";
  } catch (const lmx::Error& e) {
    EXPECT_TRUE(contains(e.what(), "invalid value 'ten' for option.request_timeout")) << e.what();
    EXPECT_TRUE(contains(e.what(), "an integer >= 0")) << e.what();
  }
}
