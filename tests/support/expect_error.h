// Test support: runs `fn`, expecting an lmx::Error whose message contains every fragment (a test
// failure naming the missing fragment otherwise, or when nothing is thrown).
#pragma once

#include <initializer_list>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/core/error.h"

namespace lmx::testing {

template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
    FAIL() << "expected an lmx::Error";
  } catch (const Error& e) {
    for (const auto& f : fragments) EXPECT_THAT(e.what(), ::testing::HasSubstr(f));
  }
}

}  // namespace lmx::testing
