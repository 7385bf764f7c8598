// An LMI request body (what /invocations and the plugin's lmx_predict take) -> the engine's
// requests: every malformed body must become lmx::RequestError naming the field.
#include <string>

#include "plugin/lmi_request.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(lmx::fuzz::text(data, size));
  lmx::fuzz::expect_only_lmx_errors([&] { lmx::plugin::parse_lmi_request(body); });
  return 0;
}
