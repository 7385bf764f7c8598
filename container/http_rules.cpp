#include "container/http_rules.h"

#include <cctype>
#include <vector>

namespace lmx::server {

namespace http = boost::beast::http;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The members of a comma-separated list field over all its lines, lower case, parameters
// (";...") dropped, empty members skipped (RFC 9110 5.6.1).
std::vector<std::string> list_members(const RequestHeader& h, http::field f) {
  std::vector<std::string> out;
  for (auto [it, end] = h.equal_range(f); it != end; ++it) {
    std::string_view v(it->value().data(), it->value().size());
    while (!v.empty()) {
      auto comma = v.find(',');
      std::string_view member = v.substr(0, comma);
      v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
      member = trim(member.substr(0, member.find(';')));
      if (!member.empty()) out.push_back(lower(member));
    }
  }
  return out;
}

}  // namespace

std::optional<Refusal> check_framing(const RequestHeader& h) {
  if (h.find(http::field::transfer_encoding) == h.end()) return std::nullopt;
  auto codings = list_members(h, http::field::transfer_encoding);
  const std::string field = "Transfer-Encoding";
  for (const auto& c : codings) {
    if (c != "chunked") {
      return Refusal{501, "transfer coding '" + c.substr(0, 64) + "' is not implemented", field};
    }
  }
  if (codings.size() != 1) {
    return Refusal{400, "Transfer-Encoding must be exactly 'chunked'", field};
  }
  if (h.version() < 11) {
    return Refusal{400, "Transfer-Encoding is not allowed in an HTTP/1.0 request", field};
  }
  if (h.find(http::field::content_length) != h.end()) {
    return Refusal{400, "Transfer-Encoding and Content-Length together", field};
  }
  return std::nullopt;
}

bool expects_continue(const RequestHeader& h, std::optional<Refusal>& refusal) {
  if (h.find(http::field::expect) == h.end()) return false;
  for (const auto& e : list_members(h, http::field::expect)) {
    if (e != "100-continue") {
      refusal = Refusal{417, "expectation '" + e.substr(0, 64) + "' is not supported", "Expect"};
      return false;
    }
  }
  return h.version() >= 11;  // an HTTP/1.0 client cannot take an interim response
}

std::string request_path(std::string_view target) {
  if (target.empty()) return "";
  if (target.front() != '/') {
    // absolute-form: scheme "://" authority [path]; the authority ends at the path or query.
    auto scheme_end = target.find("://");
    if (scheme_end == std::string_view::npos) return "";
    std::string scheme = lower(target.substr(0, scheme_end));
    if (scheme != "http" && scheme != "https") return "";
    target.remove_prefix(scheme_end + 3);
    auto path_start = target.find_first_of("/?#");
    target = path_start == std::string_view::npos ? std::string_view{} : target.substr(path_start);
    if (target.empty() || target.front() != '/') return "/";
  }
  return std::string(target.substr(0, target.find_first_of("?#")));
}

std::string media_type(std::string_view content_type) {
  std::string_view t = trim(content_type.substr(0, content_type.find(';')));
  return lower(t);
}

bool readable_body_type(std::string_view content_type) {
  const std::string t = media_type(content_type);
  return t.empty() || t == "application/json" || t == "text/plain" ||
         t == "application/x-www-form-urlencoded" || t == "application/octet-stream" ||
         (t.starts_with("application/") && t.ends_with("+json"));
}

}  // namespace lmx::server
