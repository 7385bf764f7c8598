// Encoding arbitrary bytes (invalid UTF-8 included) with a real tokenizer, decoding the ids back,
// decoding arbitrary ids, and incremental detokenization of them: the concatenated stream equals
// decode() of all ids. The tokenizer is LMX_FUZZ_TOKENIZER_DIR (stories260k's by default).
#include <cstdlib>
#include <optional>

#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const lmx::Tokenizer tok = lmx::Tokenizer::from_model_dir(
      std::getenv("LMX_FUZZ_TOKENIZER_DIR") ? std::getenv("LMX_FUZZ_TOKENIZER_DIR")
                                            : LMX_FUZZ_DEFAULT_TOKENIZER_DIR);
  const std::string_view in = lmx::fuzz::text(data, size);
  lmx::fuzz::expect_only_lmx_errors([&] {
    const auto ids = tok.encode(in);
    tok.decode(ids);
  });
  // The same bytes as ids (2 bytes each, within and beyond the vocabulary).
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < size; i += 2) ids.push_back(int32_t(data[i] | (data[i + 1] << 8)) % (tok.vocab_size() + 8));
  lmx::fuzz::expect_only_lmx_errors([&] {
    const std::string whole = tok.decode(ids);
    lmx::StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    streamed += stream.finish();
    if (streamed != whole) {
      std::fprintf(stderr, "streamed text differs from decode()\n");
      std::abort();
    }
  });
  return 0;
}
