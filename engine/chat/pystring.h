// Python's str operations on UTF-8 text, code point by code point as Python counts them: what
// templates call as methods (strip, split, title, ...) and what filters build on.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmx::chat::py {

std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view text);

// str.isspace() for one code point (Unicode White_Space plus the ASCII separators 0x1c-0x1f).
bool is_space(char32_t c);
// str.isprintable() for one code point (what repr() leaves unescaped).
bool is_printable(char32_t c);

// str.strip / lstrip / rstrip; chars == nullopt strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split / rsplit; sep == nullopt splits on whitespace runs. maxsplit < 0: no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               long long maxsplit, bool from_right);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    long long count);
// Python's case mappings (full Unicode mappings: 'ß'.upper() == 'SS').
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);  // str.title
std::string capitalize(std::string_view s);
std::string swapcase(std::string_view s);
bool is_upper(std::string_view s);
bool is_lower(std::string_view s);
// Number of code points (len()).
long long length(std::string_view s);
// str.center / ljust / rjust.
std::string pad(std::string_view s, long long width, char32_t fill, char align);
// repr() of a str: quotes and escapes as Python chooses them.
std::string repr(std::string_view s);
// s.find(sub) in code points, -1 when absent.
long long find(std::string_view s, std::string_view sub, bool from_right);
long long count(std::string_view s, std::string_view sub);

}  // namespace lmx::chat::py
