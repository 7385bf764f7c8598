#include "engine/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "engine/core/error.h"
#include "engine/tokenizer/unicode.h"

namespace lmx::tok {

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw_error("tokenizer: bad regex '{}' at offset {}: {}", pattern, offset,
                reinterpret_cast<const char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is off
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

namespace {

// Per-thread match resources: match data (one ovector pair is all we read) and a JIT stack
// that may grow to 64 MiB, so that long runs (e.g. `\s+(?!\S)` over megabytes of spaces) don't
// hit the 32 KiB default.
struct ThreadMatch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadMatch() {
    if (!data || !stack || !context) throw_error("tokenizer: out of memory for regex matching");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
  ThreadMatch(const ThreadMatch&) = delete;
  ThreadMatch& operator=(const ThreadMatch&) = delete;
};

ThreadMatch& thread_match() {
  thread_local ThreadMatch m;
  return m;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view s) const {
  auto* code = static_cast<pcre2_code*>(code_);
  std::vector<std::pair<size_t, size_t>> out;
  ThreadMatch& tm = thread_match();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t start = 0;
  while (start <= s.size()) {
    // Input was validated (or made valid) before it got here; NO_UTF_CHECK keeps this linear.
    const int rc =
        pcre2_match(code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, tm.data, tm.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw_error("tokenizer: regex '{}' failed: {}", pattern_, reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(tm.data);
    const size_t b = ov[0], e = ov[1];
    if (e == b) {
      if (b >= s.size()) break;
      start = b + utf8_len(static_cast<unsigned char>(s[b]));
      continue;
    }
    out.emplace_back(b, e);
    start = e;
  }
  return out;
}

}  // namespace lmx::tok
