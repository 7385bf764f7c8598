// A log line that repeats (accept failing, the connection cap) is written at most once per
// interval, with the count of the ones held back: a burst of failures cannot flood the log.
#pragma once

#include <chrono>
#include <cstdint>

namespace lmx::server {

class LogThrottle {
 public:
  explicit LogThrottle(std::chrono::steady_clock::duration interval) : interval_(interval) {}

  // True when a line may be written now; then `held_back` is how many were not written since
  // the last one. Not thread-safe (each user runs on one strand).
  bool allow(uint64_t& held_back) {
    auto now = std::chrono::steady_clock::now();
    if (written_ && now - last_ < interval_) {
      ++held_back_;
      return false;
    }
    written_ = true;
    last_ = now;
    held_back = held_back_;
    held_back_ = 0;
    return true;
  }

 private:
  std::chrono::steady_clock::duration interval_;
  std::chrono::steady_clock::time_point last_{};
  bool written_ = false;
  uint64_t held_back_ = 0;
};

}  // namespace lmx::server
