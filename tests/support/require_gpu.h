// Tests that need a GPU skip on machines without one (CI, a laptop) and FAIL there when the
// environment says a GPU is required: LMX_REQUIRE_GPU=1, which scripts/gpu_tests.sh sets, so on
// the device machine a missing or unusable GPU can never read as a passing suite.
#pragma once

#include <cstdlib>
#include <string_view>

#include <gtest/gtest.h>

namespace lmx::testing {

// LMX_REQUIRE_GPU=1 in the environment.
inline bool gpu_required() {
  const char* v = std::getenv("LMX_REQUIRE_GPU");
  return v != nullptr && std::string_view(v) == "1";
}

}  // namespace lmx::testing

// Leaves the current test (or SetUp) when `have` is false: a skip, or a fatal failure under
// LMX_REQUIRE_GPU=1. `why` is streamed into the message.
#define LMX_GPU_SKIP_UNLESS(have, why)                                                    \
  if (have) {                                                                             \
  } else if (::lmx::testing::gpu_required())                                              \
    GTEST_FAIL() << "LMX_REQUIRE_GPU=1 but " << why << " (a GPU test may not skip here)"; \
  else                                                                                    \
    GTEST_SKIP() << why
