// lmx-server's log records stay on one line (log collectors split at newlines).
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "container/log_format.h"

namespace lmx::server {
namespace {

TEST(LogFormat, LineBreaksAreEscaped) {
  EXPECT_EQ(one_line("2 configuration errors:\n  - a\r\n  - b"),
            "2 configuration errors:\\n  - a\\r\\n  - b");
  EXPECT_EQ(one_line("plain"), "plain");
  EXPECT_EQ(one_line(""), "");
}

TEST(LogFormat, EveryRegisteredLoggerWritesOneLineRecords) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>(
      "log_format_test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  spdlog::register_logger(logger);
  use_one_line_logs();
  logger->error("model {} failed:\n  - first\n  - second", "m");
  spdlog::drop("log_format_test");
  const std::string s = out.str();
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.find('\n'), s.size() - 1) << s;
  EXPECT_NE(s.find("] [error] model m failed:\\n  - first\\n  - second"), std::string::npos) << s;
  EXPECT_EQ(s.front(), '[');
}

}  // namespace
}  // namespace lmx::server
