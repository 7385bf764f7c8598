// Log records of lmx-server and of the plugin it loads (one spdlog registry): one line each, as
// log collectors (CloudWatch under SageMaker) split records at newlines. A newline or carriage
// return inside a message (a multi-error configuration, an exception text) is written as \n / \r.
#pragma once

#include <string>
#include <string_view>

namespace lmx::server {

// "[2025-01-31 12:00:00.123] [info] message" on stdout, for every logger; with a `tag`,
// "[2025-01-31 12:00:00.123] [tag] [info] message" (a follower process's rank).
void use_one_line_logs(std::string_view tag = {});
// The escaping alone (tests).
std::string one_line(std::string_view message);

}  // namespace lmx::server
