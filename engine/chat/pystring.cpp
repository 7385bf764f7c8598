#include "engine/chat/pystring.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include <algorithm>

#include "engine/core/error.h"
#include "engine/core/utf8.h"

namespace lmx::chat::py {
namespace {

// One code point from UTF-8; invalid bytes decode as themselves (Latin-1) so nothing is lost.
char32_t next_cp(std::string_view s, size_t& i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const int n = b < 0x80                ? 0
                : (b & 0xE0) == 0xC0 ? 1
                : (b & 0xF0) == 0xE0 ? 2
                : (b & 0xF8) == 0xF0 ? 3
                                     : -1;
  if (n <= 0 || i + static_cast<size_t>(n) >= s.size()) {
    ++i;
    return b;
  }
  char32_t cp = b & (0x3F >> n);
  for (int k = 1; k <= n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    if ((c & 0xC0) != 0x80) {
      ++i;
      return b;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  i += static_cast<size_t>(n) + 1;
  return cp;
}

std::u16string to_utf16(std::string_view s) {
  std::u16string out;
  for (char32_t c : decode(s)) {
    if (c < 0x10000) {
      out += static_cast<char16_t>(c);
    } else {
      c -= 0x10000;
      out += static_cast<char16_t>(0xD800 + (c >> 10));
      out += static_cast<char16_t>(0xDC00 + (c & 0x3FF));
    }
  }
  return out;
}

std::string from_utf16(const std::u16string& s) {
  std::u32string cps;
  for (size_t i = 0; i < s.size(); ++i) {
    char32_t c = s[i];
    if (c >= 0xD800 && c < 0xDC00 && i + 1 < s.size() && s[i + 1] >= 0xDC00 && s[i + 1] < 0xE000) {
      c = 0x10000 + ((c - 0xD800) << 10) + (s[i + 1] - 0xDC00);
      ++i;
    }
    cps += c;
  }
  return encode(cps);
}

// Full case mapping of a whole string through ICU's root locale (what Python's tables give).
std::string icu_case(std::string_view s, bool to_upper) {
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return (c & 0x80) == 0; });
  if (ascii) {
    std::string out(s);
    for (char& c : out) {
      if (to_upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
      if (!to_upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return out;
  }
  const std::u16string src = to_utf16(s);
  std::u16string dst(src.size() * 3 + 8, u'\0');
  UErrorCode status = U_ZERO_ERROR;
  const auto* in = reinterpret_cast<const UChar*>(src.data());
  auto* out = reinterpret_cast<UChar*>(dst.data());
  const int32_t n = to_upper ? u_strToUpper(out, static_cast<int32_t>(dst.size()), in,
                                           static_cast<int32_t>(src.size()), "", &status)
                             : u_strToLower(out, static_cast<int32_t>(dst.size()), in,
                                            static_cast<int32_t>(src.size()), "", &status);
  if (U_FAILURE(status)) throw Error("chat template: case mapping failed");
  dst.resize(static_cast<size_t>(n));
  return from_utf16(dst);
}

bool is_cased(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED); }

// Full title-case mapping of one code point (Python's str.title: 'ß' -> 'Ss', 'ﬁ' -> 'Fi').
std::string title_one(char32_t c) {
  std::string one;
  append_utf8(one, c);
  if (c < 0x80) return icu_case(one, true);
  const std::u16string src = to_utf16(one);
  std::u16string dst(16, u'\0');
  UErrorCode status = U_ZERO_ERROR;
  const int32_t n = u_strToTitle(reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()),
                                 reinterpret_cast<const UChar*>(src.data()),
                                 static_cast<int32_t>(src.size()), nullptr, "", &status);
  if (U_FAILURE(status)) return one;
  dst.resize(static_cast<size_t>(n));
  return from_utf16(dst);
}

std::string map_one(char32_t c, int how) {  // 0 lower, 1 upper, 2 title
  if (how == 2) return title_one(c);
  std::string one;
  append_utf8(one, c);
  return icu_case(one, how == 1);
}

}  // namespace

std::u32string decode(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size();) out += next_cp(utf8, i);
  return out;
}

std::string encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  const std::u32string t = decode(s);
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_space(c);
  };
  size_t b = 0, e = t.size();
  if (left)
    while (b < e && strip_it(t[b])) ++b;
  if (right)
    while (e > b && strip_it(t[e - 1])) --e;
  return encode(std::u32string_view(t).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               long long maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw Error("chat template: ValueError: empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<long long>(out.size()) < maxsplit) {
        const size_t at = s.find(*sep, pos);
        if (at == std::string_view::npos) break;
        out.emplace_back(s.substr(pos, at - pos));
        pos = at + sep->size();
      }
      out.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      while (maxsplit < 0 || static_cast<long long>(out.size()) < maxsplit) {
        if (end < sep->size()) break;
        const size_t at = s.rfind(*sep, end - sep->size());
        if (at == std::string_view::npos) break;
        out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
        end = at;
      }
      out.emplace_back(s.substr(0, end));
      std::reverse(out.begin(), out.end());
    }
    return out;
  }
  const std::u32string t = decode(s);
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < t.size() && is_space(t[i])) ++i;
      if (i >= t.size()) break;
      if (maxsplit >= 0 && static_cast<long long>(out.size()) >= maxsplit) {
        size_t e = t.size();
        while (e > i && is_space(t[e - 1])) --e;
        out.push_back(encode(t.substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < t.size() && !is_space(t[j])) ++j;
      out.push_back(encode(t.substr(i, j - i)));
      i = j;
    }
  } else {
    size_t e = t.size();
    while (true) {
      while (e > 0 && is_space(t[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<long long>(out.size()) >= maxsplit) {
        size_t b = 0;
        while (b < e && is_space(t[b])) ++b;
        out.push_back(encode(t.substr(b, e - b)));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_space(t[b - 1])) --b;
      out.push_back(encode(t.substr(b, e - b)));
      e = b;
    }
    std::reverse(out.begin(), out.end());
  }
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  const std::u32string t = decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const char32_t c = t[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                     c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    size_t end = i + 1;
    if (c == '\r' && i + 1 < t.size() && t[i + 1] == '\n') end = i + 2;
    out.push_back(encode(t.substr(start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < t.size()) out.push_back(encode(t.substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    long long count) {
  std::string out;
  if (old.empty()) {
    const std::u32string t = decode(s);
    long long done = 0;
    for (char32_t c : t) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t pos = 0;
  long long done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, pos);
    if (at == std::string_view::npos) break;
    out += s.substr(pos, at - pos);
    out += with;
    pos = at + old.size();
    ++done;
  }
  out += s.substr(pos);
  return out;
}

std::string upper(std::string_view s) { return icu_case(s, true); }
std::string lower(std::string_view s) { return icu_case(s, false); }

std::string title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : decode(s)) {
    out += map_one(c, prev_cased ? 0 : 2);
    prev_cased = is_cased(c);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  const std::u32string t = decode(s);
  if (t.empty()) return "";
  return map_one(t[0], 2) + lower(encode(std::u32string_view(t).substr(1)));
}

std::string swapcase(std::string_view s) {
  std::string out;
  for (char32_t c : decode(s)) {
    if (u_isUUppercase(static_cast<UChar32>(c)))
      out += map_one(c, 0);
    else if (u_isULowercase(static_cast<UChar32>(c)))
      out += map_one(c, 1);
    else
      append_utf8(out, c);
  }
  return out;
}

bool is_upper(std::string_view s) {
  bool any = false;
  for (char32_t c : decode(s)) {
    if (u_isULowercase(static_cast<UChar32>(c)) || u_istitle(static_cast<UChar32>(c))) return false;
    if (u_isUUppercase(static_cast<UChar32>(c))) any = true;
  }
  return any;
}

bool is_lower(std::string_view s) {
  bool any = false;
  for (char32_t c : decode(s)) {
    if (u_isUUppercase(static_cast<UChar32>(c)) || u_istitle(static_cast<UChar32>(c))) return false;
    if (u_isULowercase(static_cast<UChar32>(c))) any = true;
  }
  return any;
}

long long length(std::string_view s) {
  long long n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string pad(std::string_view s, long long width, char32_t fill, char align) {
  const long long len = length(s);
  if (width <= len) return std::string(s);
  const long long marg = width - len;
  long long left = 0;
  if (align == '^') left = marg / 2 + (marg & width & 1);
  if (align == '>') left = marg;
  std::string f;
  append_utf8(f, fill);
  std::string out;
  for (long long i = 0; i < left; ++i) out += f;
  out += s;
  for (long long i = 0; i < marg - left; ++i) out += f;
  return out;
}

std::string repr(std::string_view s) {
  const std::u32string t = decode(s);
  const bool has_single = t.find(U'\'') != std::u32string::npos;
  const bool has_double = t.find(U'"') != std::u32string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  static const char* hex = "0123456789abcdef";
  for (char32_t c : t) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (is_printable(c)) {
      append_utf8(out, c);
    } else {
      const int digits = c < 0x100 ? 2 : c < 0x10000 ? 4 : 8;
      out += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
      for (int k = digits - 1; k >= 0; --k) out += hex[(c >> (4 * k)) & 0xF];
    }
  }
  out += quote;
  return out;
}

long long find(std::string_view s, std::string_view sub, bool from_right) {
  const size_t at = from_right ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return length(s.substr(0, at));
}

long long count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return length(s) + 1;
  long long n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

}  // namespace lmx::chat::py
