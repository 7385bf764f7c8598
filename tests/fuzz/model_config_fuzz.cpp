// config.json -> the decoder description, for whatever architecture the input names, and the
// tensor-parallel splits a description allows.
#include <nlohmann/json.hpp>

#include "engine/model/architecture.h"
#include "engine/model/model_config.h"
#include "engine/model/shard.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto j = nlohmann::json::parse(lmx::fuzz::text(data, size), nullptr, false);
  if (j.is_discarded()) return 0;  // not JSON: the loader says so before this point
  lmx::fuzz::expect_only_lmx_errors([&] {
    const lmx::ModelConfig config = lmx::ModelConfig::from_json(j, nlohmann::json::object());
    const lmx::Architecture& arch = lmx::find_architecture(config.architecture());
    const lmx::DecoderDesc desc = arch.describe(config);
    for (int degree : {1, 2, 3, 8}) lmx::fuzz::expect_only_lmx_errors([&] { lmx::shard_plan(desc, degree); });
  });
  return 0;
}
