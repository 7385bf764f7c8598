// tokenizer.json (+ a fixed tokenizer_config.json) loading, then encoding and decoding a short
// text with whatever tokenizer loaded.
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmx::fuzz::expect_only_lmx_errors([&] {
    const lmx::Tokenizer t = lmx::Tokenizer::from_json(std::string(lmx::fuzz::text(data, size)), "");
    const auto ids = t.encode("Hello, world! \xe4\xb8\x96\xe7\x95\x8c  x");
    t.decode(ids);
  });
  return 0;
}
