#include "properties/properties_file.h"

#include "engine/core/utf8.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"

namespace lmx::properties {
namespace {

// Java's Properties treats space, tab and form feed as whitespace between tokens.
bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\f'; }

std::size_t skip_ws(std::string_view s, std::size_t pos) {
  while (pos < s.size() && is_ws(s[pos])) ++pos;
  return pos;
}

// Natural lines, split at "\n", "\r" or "\r\n" (terminators dropped).
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    lines.push_back(text.substr(start, i - start));
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

std::size_t trailing_backslashes(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size() && s[s.size() - 1 - n] == '\\') ++n;
  return n;
}

struct Where {
  const std::string& origin;
  int line;
};

// Reads the 4 hex digits of a \u escape starting at s[pos]; throws on anything else.
std::uint32_t read_hex4(std::string_view s, std::size_t pos, const Where& at) {
  if (pos + 4 > s.size())
    throw_error("{}:{}: malformed \\uXXXX escape '\\u{}': needs exactly 4 hex digits", at.origin,
                at.line, s.substr(pos));
  std::uint32_t v = 0;
  for (std::size_t i = pos; i < pos + 4; ++i) {
    const char c = s[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= static_cast<std::uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= static_cast<std::uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= static_cast<std::uint32_t>(c - 'A' + 10);
    else
      throw_error("{}:{}: malformed \\uXXXX escape '\\u{}': needs exactly 4 hex digits", at.origin,
                  at.line, s.substr(pos, 4));
  }
  return v;
}

// Resolves escapes of one key or value (the raw text still holds them).
std::string unescape(std::string_view s, const Where& at) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i >= s.size()) break;  // a lone trailing backslash (end of file) is dropped, as in Java
    switch (const char c = s[i]) {
      case 't':
        out += '\t';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        std::uint32_t cp = read_hex4(s, i + 1, at);
        i += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
          throw_error("{}:{}: \\u{:04X} is a low surrogate without a preceding high surrogate",
                      at.origin, at.line, cp);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          // UTF-16 surrogate pair written as two escapes: \uD83D\uDE00.
          if (i + 2 >= s.size() || s[i + 1] != '\\' || s[i + 2] != 'u')
            throw_error(
                "{}:{}: \\u{:04X} is a high surrogate not followed by a \\uXXXX low surrogate",
                at.origin, at.line, cp);
          const std::uint32_t lo = read_hex4(s, i + 3, at);
          if (lo < 0xDC00 || lo > 0xDFFF)
            throw_error(
                "{}:{}: \\u{:04X} is a high surrogate followed by \\u{:04X}, not a low surrogate",
                at.origin, at.line, cp, lo);
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          i += 6;
        }
        lmx::append_utf8(out, char32_t(cp));
        break;
      }
      default:
        out += c;
        break;  // `\=`, `\:`, `\ `, `\\`, `\#`, and any other char stand for themselves
    }
  }
  return out;
}

// Splits a logical line into key and value: the key ends at the first unescaped '=', ':' or
// whitespace; then whitespace, at most one '=' or ':', and more whitespace are skipped.
PropertyEntry split_entry(std::string_view logical, const Where& at) {
  std::size_t key_end = logical.size();
  std::size_t value_start = logical.size();
  bool has_separator = false;
  for (std::size_t j = 0; j < logical.size(); ++j) {
    const char c = logical[j];
    if (c == '\\') {
      ++j;
      continue;
    }
    if (c == '=' || c == ':' || is_ws(c)) {
      has_separator = (c == '=' || c == ':');
      key_end = j;
      value_start = j + 1;
      break;
    }
  }
  value_start = skip_ws(logical, value_start);
  if (!has_separator && value_start < logical.size() &&
      (logical[value_start] == '=' || logical[value_start] == ':')) {
    value_start = skip_ws(logical, value_start + 1);
  }
  PropertyEntry e;
  e.key = unescape(logical.substr(0, std::min(key_end, logical.size())), at);
  e.value = unescape(logical.substr(std::min(value_start, logical.size())), at);
  e.line = at.line;
  return e;
}

}  // namespace

PropertiesFile PropertiesFile::parse(std::string_view text, std::string origin) {
  PropertiesFile file;
  file.origin_ = std::move(origin);
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte-order mark

  const std::vector<std::string_view> lines = split_lines(text);
  std::size_t i = 0;
  while (i < lines.size()) {
    const int first_line = static_cast<int>(i) + 1;
    std::string_view seg = lines[i++];
    std::size_t pos = skip_ws(seg, 0);
    if (pos == seg.size()) continue;                   // blank line
    if (seg[pos] == '#' || seg[pos] == '!') continue;  // comments never continue
    seg.remove_prefix(pos);

    // An odd number of trailing backslashes continues the logical line on the next natural
    // line, whose leading whitespace is dropped. A blank continued line ends the logical line.
    std::string logical;
    while (true) {
      if (trailing_backslashes(seg) % 2 == 0) {
        logical += seg;
        break;
      }
      logical += seg.substr(0, seg.size() - 1);
      if (i >= lines.size()) break;  // continuation at end of file: backslash dropped
      seg = lines[i++];
      seg.remove_prefix(skip_ws(seg, 0));
    }
    file.entries_.push_back(split_entry(logical, Where{file.origin_, first_line}));
  }
  return file;
}

PropertiesFile PropertiesFile::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("cannot read {}: {}", path.string(), std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw_error("error while reading {}", path.string());
  return parse(buf.str(), path.string());
}

const PropertyEntry* PropertiesFile::find(std::string_view key) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
    if (it->key == key) return &*it;
  return nullptr;
}

}  // namespace lmx::properties
