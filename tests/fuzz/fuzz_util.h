// Shared by the fuzz targets (tests/fuzz/): what counts as a finding is a crash, a sanitizer
// report, or an exception that is not lmx's own error type (every parser must turn bad input into
// lmx::Error / RequestError with a message, never leak a library exception or abort).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include <unistd.h>

#include "engine/core/error.h"

namespace lmx::fuzz {

inline std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs fn(); lmx::Error (the documented failure) is fine, anything else aborts: a finding.
template <typename Fn>
void expect_only_lmx_errors(Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not an lmx::Error: %s\n", e.what());
    std::abort();
  }
}

}  // namespace lmx::fuzz
