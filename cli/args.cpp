#include "args.h"

#include <cerrno>
#include <cstdlib>

#include "engine/core/error.h"

namespace lmx::cli {

Args::Args(int argc, char** argv, std::set<std::string> value_flags,
           std::set<std::string> switches) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (switches.count(arg)) {
      switches_set_.insert(arg);
    } else if (value_flags.count(arg)) {
      if (i + 1 >= argc) throw_error("{} needs a value", arg);
      values_[arg] = argv[++i];
    } else {
      throw_error("unknown option '{}'", arg);
    }
  }
}

bool Args::has(const std::string& flag) const {
  return switches_set_.count(flag) || values_.count(flag);
}

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::require(const std::string& flag) const {
  auto v = get(flag);
  if (!v) throw_error("{} is required", flag);
  return *v;
}

std::optional<long long> Args::get_int(const std::string& flag) const {
  auto v = get(flag);
  if (!v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE)
    throw_error("{} expects an integer, got '{}'", flag, *v);
  return n;
}

std::optional<double> Args::get_double(const std::string& flag) const {
  auto v = get(flag);
  if (!v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || errno == ERANGE)
    throw_error("{} expects a number, got '{}'", flag, *v);
  return x;
}

std::vector<int> Args::parse_int_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || v < 0 || v > INT32_MAX)
      throw_error("{} expects comma-separated non-negative integers, got '{}'", flag, text);
    out.push_back(static_cast<int>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace lmx::cli
