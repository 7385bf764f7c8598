// OpenAI request bodies as lmx-server reads them: /v1/completions (parse_openai_request) when the
// first byte is even, /v1/chat/completions and LMI's messages (parse_chat_request, then each
// choice's plugin request) when it is odd; the body is the rest. Bad bodies must be BadRequest
// (the server's 400 with the field named); any other exception or a crash is a finding.
#include <string>

#include "container/chat_schema.h"
#include "container/lmi_schema.h"
#include "container/openai_schema.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = data[0] % 2 == 1;
  const std::string body(lmx::fuzz::text(data + 1, size - 1));
  lmx::fuzz::expect_only_lmx_errors([&] {
    try {
      if (!chat) {
        const auto r = lmx::server::parse_openai_request(body);
        (void)r.lmi.dump();
        return;
      }
      const auto r = lmx::server::parse_chat_request(body);
      for (int i = 0; i < r.n; ++i) (void)lmx::server::choice_request(r, i);
    } catch (const lmx::server::BadRequest&) {
    }
  });
  return 0;
}
