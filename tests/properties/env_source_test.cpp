// Environment variables -> property keys.
#include "properties/env_source.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace {

using lmx::properties::Environment;
using lmx::properties::EnvLayer;
using lmx::properties::EnvSetting;
using lmx::properties::map_environment;

const EnvSetting* find_var(const std::vector<EnvSetting>& s, const std::string& variable) {
  auto it =
      std::find_if(s.begin(), s.end(), [&](const EnvSetting& e) { return e.variable == variable; });
  return it == s.end() ? nullptr : &*it;
}

TEST(EnvSource, OptionVariablesAreLowerCased) {
  const auto s = map_environment(Environment::from_map({{"OPTION_MODEL_ID", "/m"},
                                                        {"OPTION_ENTRYPOINT", "djl_python.x"},
                                                        {"OPTION_DTYPE", "FP32"}}));
  ASSERT_EQ(s.size(), 3u);
  const EnvSetting* dtype = find_var(s, "OPTION_DTYPE");
  ASSERT_NE(dtype, nullptr);
  EXPECT_EQ(dtype->key, "option.dtype");
  EXPECT_EQ(dtype->value, "FP32");  // values keep their case; only the key is lower-cased
  EXPECT_EQ(dtype->layer, EnvLayer::Option);
  EXPECT_EQ(find_var(s, "OPTION_ENTRYPOINT")->key, "option.entrypoint");
  EXPECT_EQ(find_var(s, "OPTION_MODEL_ID")->key, "option.model_id");
}

TEST(EnvSource, KvCacheDtypeVariable) {
  const auto s = map_environment(Environment::from_map({{"OPTION_KV_CACHE_DTYPE", "FP8"}}));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].key, "option.kv_cache_dtype");
  EXPECT_EQ(s[0].value, "FP8");
  EXPECT_EQ(s[0].layer, EnvLayer::Option);
}

TEST(EnvSource, ServingVariablesMapToServerKeys) {
  const auto s = map_environment(Environment::from_map(
      {{"SERVING_JOB_QUEUE_SIZE", "10"}, {"SERVING_CHUNKED_READ_TIMEOUT", "5"}}));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(find_var(s, "SERVING_JOB_QUEUE_SIZE")->key, "job_queue_size");
  EXPECT_EQ(find_var(s, "SERVING_CHUNKED_READ_TIMEOUT")->key, "chunked_read_timeout");
}

TEST(EnvSource, NamedVariables) {
  const auto s = map_environment(Environment::from_map({{"HF_MODEL_ID", "/opt/ml/model"},
                                                        {"HF_REVISION", "abc"},
                                                        {"TENSOR_PARALLEL_DEGREE", "max"},
                                                        {"HF_TASK", "text-generation"},
                                                        {"HF_MODEL_TRUST_REMOTE_CODE", "true"}}));
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(find_var(s, "HF_MODEL_ID")->key, "option.model_id");
  EXPECT_EQ(find_var(s, "HF_REVISION")->key, "option.revision");
  EXPECT_EQ(find_var(s, "TENSOR_PARALLEL_DEGREE")->key, "option.tensor_parallel_degree");
  EXPECT_EQ(find_var(s, "TENSOR_PARALLEL_DEGREE")->value, "max");
  EXPECT_EQ(find_var(s, "HF_TASK")->key, "option.task");
  EXPECT_EQ(find_var(s, "HF_MODEL_TRUST_REMOTE_CODE")->key, "option.trust_remote_code");
  for (const EnvSetting& e : s) EXPECT_EQ(e.layer, EnvLayer::Named) << e.variable;
}

TEST(EnvSource, TgiAliases) {
  const auto s = map_environment(Environment::from_map({{"SM_NUM_GPUS", "4"},
                                                        {"HF_MODEL_QUANTIZE", "smoothquant"},
                                                        {"MAX_BATCH_SIZE", "8"},
                                                        {"MAX_CONCURRENT_REQUESTS", "64"},
                                                        {"ENABLE_CUDA_GRAPHS", "true"}}));
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(find_var(s, "SM_NUM_GPUS")->key, "option.tensor_parallel_degree");
  EXPECT_EQ(find_var(s, "HF_MODEL_QUANTIZE")->key, "option.quantize");
  EXPECT_EQ(find_var(s, "MAX_BATCH_SIZE")->key, "option.max_rolling_batch_size");
  EXPECT_EQ(find_var(s, "MAX_CONCURRENT_REQUESTS")->key, "job_queue_size");
  EXPECT_EQ(find_var(s, "ENABLE_CUDA_GRAPHS")->key, "option.enable_cuda_graph");
  for (const EnvSetting& e : s) EXPECT_EQ(e.layer, EnvLayer::Alias) << e.variable;
}

TEST(EnvSource, OrderIsPrecedence) {
  const auto s = map_environment(Environment::from_map({{"SM_NUM_GPUS", "4"},
                                                        {"TENSOR_PARALLEL_DEGREE", "2"},
                                                        {"OPTION_TENSOR_PARALLEL_DEGREE", "1"}}));
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].variable, "OPTION_TENSOR_PARALLEL_DEGREE");
  EXPECT_EQ(s[1].variable, "TENSOR_PARALLEL_DEGREE");
  EXPECT_EQ(s[2].variable, "SM_NUM_GPUS");
}

TEST(EnvSource, UnrelatedVariablesAreIgnored) {
  const auto s = map_environment(Environment::from_map({{"PATH", "/bin"},
                                                        {"HOME", "/root"},
                                                        {"OPTION_", "x"},
                                                        {"SERVING_", "y"},
                                                        {"option_dtype", "fp16"}}));
  EXPECT_TRUE(s.empty());
}

TEST(EnvSource, FromProcessReadsEnviron) {
  ::setenv("OPTION_LMX_TEST_MARKER", "42", 1);
  const Environment env = Environment::from_process(3);
  ::unsetenv("OPTION_LMX_TEST_MARKER");
  ASSERT_NE(env.get("OPTION_LMX_TEST_MARKER"), nullptr);
  EXPECT_EQ(*env.get("OPTION_LMX_TEST_MARKER"), "42");
  EXPECT_EQ(env.gpu_count, 3);
}

TEST(EnvSource, CudaVisibleDevicesEmptyHidesAllGpus) {
  EXPECT_EQ(visible_gpu_count(Environment::from_map({{"CUDA_VISIBLE_DEVICES", ""}})), 0);
  EXPECT_EQ(visible_gpu_count(Environment::from_map({{"CUDA_VISIBLE_DEVICES", "-1"}})), 0);
  // Never more than listed.
  EXPECT_LE(visible_gpu_count(Environment::from_map({{"CUDA_VISIBLE_DEVICES", "0"}})), 1);
}

}  // namespace
