// Minimal `--flag value` / `--switch` parser shared by the lmx subcommands. Unknown flags, missing
// values and malformed numbers are errors that name the flag.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace lmx::cli {

class Args {
 public:
  // value_flags take one argument ("--model DIR"); switches take none ("--json").
  Args(int argc, char** argv, std::set<std::string> value_flags, std::set<std::string> switches);

  bool has(const std::string& flag) const;
  std::optional<std::string> get(const std::string& flag) const;
  std::string require(const std::string& flag) const;
  std::optional<long long> get_int(const std::string& flag) const;
  std::optional<double> get_double(const std::string& flag) const;
  // "1,2,3" -> {1,2,3}
  static std::vector<int> parse_int_list(const std::string& flag, const std::string& text);

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> switches_set_;
};

}  // namespace lmx::cli
