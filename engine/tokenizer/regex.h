// A compiled PCRE2 pattern (UTF + UCP, JIT when available) used by Split, ByteLevel, Whitespace
// and Replace. Immutable after construction and safe to share across threads: match data and
// the JIT stack are per thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmx::tok {

class Regex {
 public:
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every non-overlapping match in s, as [begin, end) byte offsets, left to right. Empty matches
  // are skipped (advancing one code point) as Rust's regex find_iter does.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace lmx::tok
