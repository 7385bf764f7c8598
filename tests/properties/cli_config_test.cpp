// `lmx config --model-dir DIR` end to end: runs the built binary and parses its JSON. Also the
// argument errors of lmx bench (shared quantization flags) and lmx render-chat.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "temp_model_dir.h"

namespace {

using lmx::properties::testing::TempModelDir;

struct Result {
  int exit_code = -1;
  std::string out;
};

// Runs a shell command, capturing stdout (stderr goes to `stderr_file` when given).
Result run(const std::string& command) {
  Result r;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string lmx_binary() { return std::string(LMX_BINARY_DIR) + "/bin/lmx"; }

class LmxConfigCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(lmx_binary())) GTEST_SKIP() << "no " << lmx_binary();
  }
};

TEST_F(LmxConfigCli, PrintsResolvedConfigurationWithSources) {
  TempModelDir dir("# model\noption.max_tokens=2048\nfoo=bar\n");
  const Result r =
      run("OPTION_OUTPUT_FORMATTER=sse MAX_CONCURRENT_REQUESTS=9 " + lmx_binary() +
          " config --model-dir '" + dir.path().string() + "' --gpus 0 --compact 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto& s = j["settings"];
  EXPECT_EQ(s["option.max_tokens"]["value"], 2048);
  EXPECT_EQ(s["option.max_tokens"]["source"], "file");
  EXPECT_EQ(s["option.max_tokens"]["line"], 2);
  EXPECT_EQ(s["option.output_formatter"]["value"], "sse");
  EXPECT_EQ(s["option.output_formatter"]["origin"], "OPTION_OUTPUT_FORMATTER");
  EXPECT_EQ(s["job_queue_size"]["value"], 9);
  EXPECT_EQ(s["job_queue_size"]["source"], "alias");
  EXPECT_EQ(s["option.dtype"]["source"], "default");
  EXPECT_EQ(j["unknown"]["foo"], "bar");
  EXPECT_EQ(j["model_dir"], dir.path().string());
}

TEST_F(LmxConfigCli, InvalidConfigurationFailsWithTheReason) {
  TempModelDir dir("option.dtype=fp9\n");
  const Result r = run(lmx_binary() + " config --model-dir '" + dir.path().string() + "' 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("invalid value 'fp9' for option.dtype"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("line 1 of " + dir.props()), std::string::npos) << r.out;
}

// With a model beside the properties it names the architecture and the path it runs (CPU here:
// the reference; the fused / generic choice is the CUDA backend's).
TEST_F(LmxConfigCli, ReportsTheModelsExecutionPath) {
  const std::string model = std::string(LMX_FIXTURES_DIR) + "/parity/gpt2";
  const Result r = run(lmx_binary() + " config --model-dir '" + model + "' --gpus 0 --compact 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["architecture"], "GPT2LMHeadModel");
  EXPECT_EQ(j["model"]["path"], "cpu_reference");
  EXPECT_NE(j["model"]["path_reason"].get<std::string>().find("no kernel-injection policy"),
            std::string::npos) << r.out;
}

TEST_F(LmxConfigCli, MissingModelDirIsAnError) {
  const Result r = run(lmx_binary() + " config 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("--model-dir"), std::string::npos) << r.out;
}

// lmx bench reads --quantize with lmx generate's parser (cli/quant_flags.h), and its argument
// errors come before the CUDA check, so a CPU build reports them too.
class LmxBenchCli : public LmxConfigCli {};

TEST_F(LmxBenchCli, BadQuantizeValueIsNamed) {
  const Result r = run(lmx_binary() + " bench --quantize bogus 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--quantize must be dynamic_int8, smoothquant, fp8 or none, got 'bogus'"),
            std::string::npos) << r.out;
}

TEST_F(LmxBenchCli, SmoothquantIsNotCalibrated) {
  const Result flag = run(lmx_binary() + " bench --quantize smoothquant --smoothquant-alpha 0.5 2>&1");
  EXPECT_EQ(flag.exit_code, 1);
  EXPECT_NE(flag.out.find("--smoothquant-alpha calibrates: lmx bench --quantize smoothquant runs "
                          "on random weights"),
            std::string::npos) << flag.out;
  const Result model = run(lmx_binary() + " bench --quantize smoothquant --model /nonexistent 2>&1");
  EXPECT_EQ(model.exit_code, 1);
  EXPECT_NE(model.out.find("runs on random weights (--shape)"), std::string::npos) << model.out;
  const Result other = run(lmx_binary() + " bench --quantize fp8 --smoothquant-alpha 0.5 2>&1");
  EXPECT_NE(other.out.find("--smoothquant-alpha applies to --quantize smoothquant"),
            std::string::npos) << other.out;
}

TEST_F(LmxBenchCli, HelpNamesTheQuantizationFlags) {
  const Result r = run(lmx_binary() + " bench --help");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* flag : {"--quantize dynamic_int8 [--quantize-group-size N]",
                           "--quantize smoothquant", "--quantize fp8", "--kv-cache-dtype"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
}

class LmxRenderChatCli : public LmxConfigCli {};

TEST_F(LmxRenderChatCli, NamesWhatIsMissing) {
  const Result none = run(lmx_binary() + " render-chat 2>&1");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.out.find("one of --template or --model is required"), std::string::npos)
      << none.out;
  TempModelDir dir("");
  const std::string tmpl = (dir.path() / "t.jinja").string();
  std::FILE* f = std::fopen(tmpl.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{{ messages[0].content }}", f);
  std::fclose(f);
  const Result no_messages = run(lmx_binary() + " render-chat --template '" + tmpl + "' 2>&1");
  EXPECT_EQ(no_messages.exit_code, 1);
  EXPECT_NE(no_messages.out.find("--messages is required"), std::string::npos) << no_messages.out;
}

}  // namespace
