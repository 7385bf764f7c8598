// option.quantize=dynamic_int8 and its spellings: OPTION_QUANTIZE, the HF_MODEL_QUANTIZE alias,
// LMI's option.dtype=int8, option.quantize_group_size; option.quantize=smoothquant and its
// option.smoothquant_* keys; both on cpu and cuda, and a build whose table lacks a method on a
// device refuses it by name (docs/quantization.md).
#include <cstring>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "properties/serving_config.h"
#include "temp_model_dir.h"

namespace {

using namespace lmx::properties;
using lmx::properties::testing::TempModelDir;

ServingConfig load(const TempModelDir& dir, std::map<std::string, std::string> env = {},
                   int gpus = 0, const EngineCapabilities& caps = EngineCapabilities::cpu_only()) {
  return load_serving_config(dir.path(), Environment::from_map(std::move(env), gpus), caps);
}

std::string error_of(const TempModelDir& dir, std::map<std::string, std::string> env = {},
                     int gpus = 0, const EngineCapabilities& caps = EngineCapabilities::cpu_only()) {
  try {
    load(dir, std::move(env), gpus, caps);
  } catch (const lmx::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "configuration was accepted";
  return "";
}

::testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << needle << "' not in: " << haystack;
}

// A build with the CUDA backend: dynamic_int8, smoothquant and fp8 on both devices (what
// this_build() says with CUDA).
EngineCapabilities with_cuda() {
  EngineCapabilities c = EngineCapabilities::cpu_only();
  c.devices.insert(Device::Cuda);
  c.dtypes.insert({Dtype::Fp16, Dtype::Bf16});
  c.quantize[Device::Cuda] = {Quantize::DynamicInt8, Quantize::SmoothQuant, Quantize::Fp8};
  return c;
}

TEST(Quantize, DynamicInt8RunsOnCpuFromEverySpelling) {
  TempModelDir file("option.quantize=dynamic_int8\n");
  EXPECT_EQ(load(file).quantize, Quantize::DynamicInt8);
  TempModelDir dir;
  const ServingConfig env = load(dir, {{"OPTION_QUANTIZE", "DYNAMIC_INT8"}});
  EXPECT_EQ(env.quantize, Quantize::DynamicInt8);
  EXPECT_EQ(env.source_of("option.quantize").kind, ValueSource::Kind::Environment);
  const ServingConfig alias = load(dir, {{"HF_MODEL_QUANTIZE", "dynamic_int8"}});
  EXPECT_EQ(alias.quantize, Quantize::DynamicInt8);
  EXPECT_EQ(alias.source_of("option.quantize").kind, ValueSource::Kind::Alias);
  // The explicit OPTION_ spelling beats the TGI alias.
  EXPECT_EQ(load(dir, {{"HF_MODEL_QUANTIZE", "dynamic_int8"}, {"OPTION_QUANTIZE", "none"}}).quantize,
            Quantize::None);
  EXPECT_FALSE(load(file).quantize_group_size.has_value());
  EXPECT_TRUE(contains(load(file).source_of("option.quantize_group_size").note, "per output channel"));
}

TEST(Quantize, CudaRunsDynamicInt8PerChannelAndGroupsOf64OrMore) {
  TempModelDir dir("option.device=cuda\noption.quantize=dynamic_int8\n");
  EXPECT_EQ(load(dir, {}, 1, with_cuda()).quantize, Quantize::DynamicInt8);
  EXPECT_EQ(load(dir, {{"HF_MODEL_QUANTIZE", "dynamic_int8"}}, 1, with_cuda()).quantize,
            Quantize::DynamicInt8);
  TempModelDir grouped("option.device=cuda\noption.quantize=dynamic_int8\noption.quantize_group_size=128\n");
  EXPECT_EQ(load(grouped, {}, 1, with_cuda()).quantize_group_size, 128);
  // Groups under 64 columns: the CUDA kernels cannot scale them, refused by name (the CPU takes
  // them).
  TempModelDir small(
      "option.device=cuda\noption.quantize=dynamic_int8\noption.quantize_group_size=32\n");
  const std::string g = error_of(small, {}, 1, with_cuda());
  EXPECT_TRUE(contains(g, "option.quantize_group_size"));
  EXPECT_TRUE(contains(g, "groups of 64 or more"));
  TempModelDir cpu("option.quantize=dynamic_int8\noption.quantize_group_size=32\n");
  EXPECT_EQ(load(cpu).quantize_group_size, 32);
}

TEST(Quantize, LmiDtypeInt8MeansDynamicInt8With16BitActivations) {
  TempModelDir dir("option.dtype=int8\n");
  const ServingConfig cpu = load(dir);
  EXPECT_EQ(cpu.quantize, Quantize::DynamicInt8);
  EXPECT_EQ(cpu.dtype, Dtype::Fp32);  // the CPU backend's activations
  EXPECT_TRUE(contains(cpu.source_of("option.dtype").note, "int8 = option.quantize=dynamic_int8 with fp32 activations"));
  EXPECT_TRUE(contains(cpu.source_of("option.quantize").note, "dynamic_int8 from option.dtype=int8"));
  ASSERT_EQ(cpu.warnings.size(), 1u);
  EXPECT_TRUE(contains(cpu.warnings[0], "LMI's spelling of option.quantize=dynamic_int8"));

  TempModelDir cuda("option.device=cuda\noption.dtype=INT8\n");
  const ServingConfig gpu = load(cuda, {}, 1, EngineCapabilities::everything());
  EXPECT_EQ(gpu.quantize, Quantize::DynamicInt8);
  EXPECT_EQ(gpu.dtype, Dtype::Fp16);
  EXPECT_EQ(load(cuda, {}, 1, with_cuda()).quantize, Quantize::DynamicInt8);

  TempModelDir both("option.dtype=int8\noption.quantize=dynamic_int8\n");
  EXPECT_EQ(load(both).quantize, Quantize::DynamicInt8);
  TempModelDir clash("option.dtype=int8\noption.quantize=smoothquant\n");
  EXPECT_TRUE(contains(error_of(clash, {}, 0, EngineCapabilities::everything()),
                       "int8 means option.quantize=dynamic_int8, but option.quantize is smoothquant"));
}

TEST(Quantize, GroupSize) {
  TempModelDir ok("option.quantize=dynamic_int8\noption.quantize_group_size=128\n");
  EXPECT_EQ(load(ok).quantize_group_size, 128);
  TempModelDir env;
  EXPECT_EQ(load(env, {{"OPTION_QUANTIZE", "dynamic_int8"}, {"OPTION_QUANTIZE_GROUP_SIZE", "64"}})
                .quantize_group_size,
            64);
  for (const char* bad : {"48", "0", "2", "-128", "131072", "abc", ""}) {
    SCOPED_TRACE(bad);
    TempModelDir dir(std::string("option.quantize=dynamic_int8\noption.quantize_group_size=") + bad + "\n");
    const std::string e = error_of(dir);
    EXPECT_TRUE(contains(e, std::string("invalid value '") + bad + "' for option.quantize_group_size"));
    EXPECT_TRUE(contains(e, "a power of two from 4 to 65536"));
  }
  TempModelDir alone("option.quantize_group_size=128\n");
  EXPECT_TRUE(contains(error_of(alone), "option.quantize_group_size=128 (from line 1 of"));
  EXPECT_TRUE(contains(error_of(alone), "only used with option.quantize=dynamic_int8"));
}

}  // namespace

namespace {

TEST(Quantize, SmoothQuantRunsOnCpuWithItsSettings) {
  TempModelDir plain("option.quantize=smoothquant\n");
  const ServingConfig c = load(plain);
  EXPECT_EQ(c.quantize, Quantize::SmoothQuant);
  EXPECT_FALSE(c.smoothquant_alpha.has_value());
  EXPECT_TRUE(contains(c.source_of("option.smoothquant_alpha").note, "searched"));
  EXPECT_TRUE(c.smoothquant_calibration_file.empty());
  EXPECT_TRUE(contains(c.source_of("option.smoothquant_calibration_file").note, "built into LMX"));
  EXPECT_EQ(c.smoothquant_calibration_samples, 128);
  TempModelDir set("option.quantize=smoothquant\noption.smoothquant_alpha=0.65\n"
                   "option.smoothquant_calibration_file=calib.txt\n"
                   "option.smoothquant_calibration_samples=7\n");
  set.write("calib.txt", "some text\n");
  const ServingConfig s = load(set);
  EXPECT_DOUBLE_EQ(*s.smoothquant_alpha, 0.65);
  EXPECT_EQ(s.smoothquant_calibration_file, (set.path() / "calib.txt").string());  // model-relative
  EXPECT_EQ(s.smoothquant_calibration_samples, 7);
  TempModelDir env;
  const ServingConfig e = load(env, {{"OPTION_QUANTIZE", "smoothquant"}, {"OPTION_SMOOTHQUANT_ALPHA", "0"},
                                     {"OPTION_SMOOTHQUANT_CALIBRATION_SAMPLES", "1000000"}});
  EXPECT_DOUBLE_EQ(*e.smoothquant_alpha, 0.0);
  EXPECT_EQ(e.smoothquant_calibration_samples, 1000000);
}

TEST(Quantize, SmoothQuantSettingsRefuseBadValues) {
  struct Bad {
    const char* line;
    const char* says;
  };
  for (const Bad& b : {Bad{"option.smoothquant_alpha=1.01", "a number from 0 to 1"},
                       Bad{"option.smoothquant_alpha=inf", "a number from 0 to 1"},
                       Bad{"option.smoothquant_alpha=0.5x", "a number from 0 to 1"},
                       Bad{"option.smoothquant_calibration_samples=0", "an integer from 1 to 1000000"},
                       Bad{"option.smoothquant_calibration_samples=1000001", "an integer from 1 to 1000000"},
                       Bad{"option.smoothquant_calibration_samples=64.5", "an integer from 1 to 1000000"},
                       Bad{"option.smoothquant_calibration_file=missing.txt", "a text file"}}) {
    SCOPED_TRACE(b.line);
    TempModelDir dir(std::string("option.quantize=smoothquant\n") + b.line + "\n");
    const std::string e = error_of(dir);
    EXPECT_TRUE(contains(e, std::string("invalid value '") + (std::strchr(b.line, '=') + 1)));
    EXPECT_TRUE(contains(e, b.says));
  }
  // Settings of smoothquant with another method: a conflict naming the key.
  TempModelDir other("option.quantize=dynamic_int8\noption.smoothquant_calibration_samples=8\n");
  EXPECT_TRUE(contains(error_of(other), "option.smoothquant_calibration_samples=8"));
  EXPECT_TRUE(contains(error_of(other), "only used with option.quantize=smoothquant"));
}

// fp8 (E4M3 W8A8) runs on both devices; this build's own table says so with CUDA.
TEST(Quantize, Fp8RunsOnCpuAndCuda) {
  TempModelDir cpu("option.quantize=fp8\n");
  EXPECT_EQ(load(cpu).quantize, Quantize::Fp8);
  TempModelDir env;
  EXPECT_EQ(load(env, {{"OPTION_QUANTIZE", "FP8"}}).quantize, Quantize::Fp8);
  TempModelDir cuda("option.device=cuda\noption.quantize=fp8\n");
  EXPECT_EQ(load(cuda, {}, 1, with_cuda()).quantize, Quantize::Fp8);
  EXPECT_EQ(EngineCapabilities::everything().quantize.at(Device::Cuda).count(Quantize::Fp8), 1u);
  TempModelDir bad("option.quantize=fp4\n");
  EXPECT_TRUE(contains(error_of(bad), "dynamic_int8, smoothquant, fp8, none"));
}

TEST(Quantize, SmoothQuantRunsOnCuda) {
  TempModelDir dir("option.device=cuda\noption.quantize=smoothquant\n");
  EXPECT_EQ(load(dir, {}, 1, with_cuda()).quantize, Quantize::SmoothQuant);
}

// A build whose capability table lacks a method on a device (as smoothquant on cuda before its
// kernels existed): refused by name, with what the build does support.
TEST(Quantize, AMethodWithoutKernelsOnTheDeviceIsRefusedByName) {
  EngineCapabilities caps = with_cuda();
  caps.quantize[Device::Cuda] = {Quantize::DynamicInt8};
  TempModelDir dir("option.device=cuda\noption.quantize=smoothquant\n");
  const std::string e = error_of(dir, {}, 1, caps);
  EXPECT_TRUE(contains(e, "option.quantize=smoothquant (from line 2 of"));
  EXPECT_TRUE(contains(e, "not supported by this build of LMX yet"));
  EXPECT_TRUE(contains(e, "quantize dynamic_int8, smoothquant, fp8 on cpu; quantize dynamic_int8 on cuda"));
  TempModelDir cpu("option.device=cpu\noption.quantize=smoothquant\n");
  EXPECT_EQ(load(cpu, {}, 1, caps).quantize, Quantize::SmoothQuant);
}

}  // namespace
