#include "container/log_format.h"

#include <memory>
#include <string>

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

namespace lmx::server {

std::string one_line(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (char c : message) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// %* : the message with line breaks escaped.
class OneLineMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string text = one_line(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<OneLineMessage>();
  }
};

}  // namespace

void use_one_line_logs(std::string_view tag) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  const std::string prefix = tag.empty() ? std::string() : fmt::format("[{}] ", one_line(tag));
  formatter->add_flag<OneLineMessage>('*').set_pattern(
      fmt::format("[%Y-%m-%d %H:%M:%S.%e] {}[%l] %*", prefix));
  spdlog::set_formatter(std::move(formatter));
}

}  // namespace lmx::server
