// Error type used inside the engine. Internal code throws lmx::Error with a message that names
// what was wrong (file, tensor, key, value, what is allowed); the plugin boundary catches it.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace lmx {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad request input (HTTP 400). `field` names the offending request field, e.g.
// "parameters.top_p" or "inputs".
class RequestError : public Error {
 public:
  RequestError(std::string field, const std::string& message)
      : Error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// A RequestError whose message starts with the field: "tools[0].function.name: must be ...".
[[noreturn]] inline void throw_field_error(const std::string& field, const std::string& message) {
  throw RequestError(field, fmt::format("{}: {}", field, message));
}

// throw_error("tensor {} has shape {}, expected {}", name, a, b)
template <typename... Args>
[[noreturn]] void throw_error(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace lmx
