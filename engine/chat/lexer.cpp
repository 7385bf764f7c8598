#include "engine/chat/lexer.h"

#include <cstring>

#include "engine/chat/pystring.h"
#include "engine/core/error.h"
#include "engine/core/utf8.h"

namespace lmx::chat {
namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw Error(fmt::format("chat template: line {}: {}", line, what));
}

// Length in bytes of the whitespace code point (Python's \s) starting at s[i], or 0.
size_t space_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  size_t n = 1;
  const auto b = static_cast<unsigned char>(s[i]);
  if (b >= 0xC0) n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
  if (i + n > s.size()) return 0;
  const std::u32string cp = py::decode(s.substr(i, n));
  return cp.size() == 1 && py::is_space(cp[0]) ? n : 0;
}

// Length in bytes of the whitespace code point ending at s[end - 1], or 0.
size_t space_before(std::string_view s, size_t end) {
  for (size_t n = 1; n <= 3 && n <= end; ++n) {
    const auto b = static_cast<unsigned char>(s[end - n]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    return space_at(s, end - n) == n ? n : 0;
  }
  return 0;
}

std::string rstrip(std::string_view s) {
  size_t end = s.size();
  while (size_t n = space_before(s, end)) end -= n;
  return std::string(s.substr(0, end));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a literal's body (what jinja2 applies to strings).
std::string unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        char32_t cp = 0;
        for (size_t k = 1; k <= digits; ++k) {
          const int h = i + k < body.size() ? hex_value(body[i + k]) : -1;
          if (h < 0) fail(line, fmt::format("truncated \\{} escape in a string literal", c));
          cp = cp * 16 + static_cast<char32_t>(h);
        }
        if (cp > 0x10FFFF) fail(line, "illegal Unicode character in a string literal");
        append_utf8(out, cp);
        i += digits;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          char32_t cp = 0;
          size_t k = 0;
          while (k < 3 && i + k < body.size() && body[i + k] >= '0' && body[i + k] <= '7')
            cp = cp * 8 + static_cast<char32_t>(body[i + k++] - '0');
          append_utf8(out, cp);
          i += k - 1;
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// (\d+_)*\d+ at i: returns the end, or i when there is no digit.
size_t scan_digits(std::string_view s, size_t i) {
  size_t j = i;
  while (j < s.size() && is_digit(s[j])) {
    ++j;
    if (j + 1 < s.size() && s[j] == '_' && is_digit(s[j + 1])) ++j;
  }
  return j;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < s_.size()) {
      size_t tag = s_.find('{', pos);
      while (tag != std::string::npos && tag + 1 < s_.size() && !std::strchr("{%#", s_[tag + 1]))
        tag = s_.find('{', tag + 1);
      if (tag == std::string::npos || tag + 1 >= s_.size()) {
        emit_data(s_.substr(pos));
        break;
      }
      const char kind = s_[tag + 1];
      char sign = tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+') ? s_[tag + 2] : 0;
      std::string text = s_.substr(pos, tag - pos);
      if (sign == '-') {
        text = rstrip(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: drop the spaces between the line start and a block or comment tag.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
          size_t k = l_pos;
          while (size_t n = space_at(text, k)) k += n;
          if (k == text.size()) text.resize(l_pos);
        }
      }
      emit_data(text);
      size_t p = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = comment_end(p, line_starting);
      } else if (kind == '%' && is_raw(p, &p)) {
        pos = raw(p, line_starting);
      } else {
        pos = tag_body(kind == '{', p, line_starting);
      }
    }
    tokens_.push_back({Token::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) line_ += s_[i] == '\n';
  }

  void emit_data(const std::string& text) {
    if (!text.empty()) tokens_.push_back({Token::kData, text, line_});
    for (char c : text) line_ += c == '\n';
  }

  // After "{#[-+]": skips to the end of the comment, returns the position after it.
  size_t comment_end(size_t p, bool& line_starting) {
    const size_t end = s_.find("#}", p);
    if (end == std::string::npos) fail(line_, "missing end of comment tag");
    size_t after = end + 2;
    const char sign = end > p ? s_[end - 1] : 0;
    if (sign == '-') {
      while (size_t n = space_at(s_, after)) after += n;
    } else if (sign != '+' && after < s_.size() && s_[after] == '\n') {
      ++after;
    }
    count_lines(p, after);
    line_starting = s_[after - 1] == '\n';
    return after;
  }

  // Whether "{%[-+]" at p is "raw %}" ("\s*raw\s*(-)?%}"); sets *body to after the tag.
  bool is_raw(size_t p, size_t* body) {
    size_t i = p;
    while (size_t n = space_at(s_, i)) i += n;
    if (s_.compare(i, 3, "raw") != 0 || (i + 3 < s_.size() && is_name_char(s_[i + 3])))
      return false;
    i += 3;
    while (size_t n = space_at(s_, i)) i += n;
    if (s_.compare(i, 3, "-%}") == 0) {
      i += 3;
      while (size_t n = space_at(s_, i)) i += n;
    } else if (s_.compare(i, 2, "%}") == 0) {
      i += 2;
    } else {
      return false;
    }
    count_lines(p, i);
    *body = i;
    return true;
  }

  size_t raw(size_t p, bool& line_starting) {
    size_t search = p;
    while (true) {
      const size_t open = s_.find("{%", search);
      if (open == std::string::npos) fail(line_, "missing end of raw directive");
      size_t i = open + 2;
      const char sign = i < s_.size() && (s_[i] == '-' || s_[i] == '+') ? s_[i] : 0;
      if (sign) ++i;
      while (size_t n = space_at(s_, i)) i += n;
      if (s_.compare(i, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      i += 6;
      while (size_t n = space_at(s_, i)) i += n;
      std::string text = s_.substr(p, open - p);
      if (sign == '-') text = rstrip(text);
      if (s_.compare(i, 3, "-%}") == 0) {
        i += 3;
        while (size_t n = space_at(s_, i)) i += n;
      } else if (s_.compare(i, 3, "+%}") == 0) {
        i += 3;
      } else if (s_.compare(i, 2, "%}") == 0) {
        i += 2;
        if (i < s_.size() && s_[i] == '\n') ++i;
      } else {
        fail(line_, "expected '%}' after endraw");
      }
      emit_data(text);
      count_lines(open, i);
      line_starting = s_[i - 1] == '\n';
      return i;
    }
  }

  // The expression tokens of a {{ }} or {% %} tag starting at p, then its end.
  size_t tag_body(bool variable, size_t p, bool& line_starting) {
    tokens_.push_back({variable ? Token::kVarBegin : Token::kBlockBegin, "", line_});
    int depth = 0;  // open ( [ {: the closing tag counts only when balanced
    size_t i = p;
    while (true) {
      if (i >= s_.size()) fail(line_, variable ? "missing '}}'" : "missing '%}'");
      if (size_t n = space_at(s_, i)) {
        line_ += s_[i] == '\n';
        i += n;
        continue;
      }
      if (depth == 0) {
        if (size_t end = tag_end(variable, i)) {
          tokens_.push_back({variable ? Token::kVarEnd : Token::kBlockEnd, "", line_});
          count_lines(i, end);
          line_starting = s_[end - 1] == '\n';
          return end;
        }
      }
      const char c = s_[i];
      if (is_digit(c)) {
        i = number(i);
      } else if (is_name_start(c)) {
        size_t j = i;
        while (j < s_.size() && is_name_char(s_[j])) ++j;
        tokens_.push_back({Token::kName, s_.substr(i, j - i), line_});
        i = j;
      } else if (c == '\'' || c == '"') {
        size_t j = i + 1;
        while (j < s_.size() && s_[j] != c) j += s_[j] == '\\' ? 2 : 1;
        if (j >= s_.size()) fail(line_, "unterminated string literal");
        tokens_.push_back({Token::kString, unescape(std::string_view(s_).substr(i + 1, j - i - 1), line_), line_});
        count_lines(i, j);
        i = j + 1;
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                           "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                           ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (s_.compare(i, std::strlen(o), o) == 0) {
            op = o;
            break;
          }
        }
        if (!op) fail(line_, fmt::format("unexpected char '{}'", c));
        if (std::strchr("([{", op[0])) ++depth;
        if (std::strchr(")]}", op[0]) && op[1] == 0) {
          if (depth == 0) fail(line_, fmt::format("unexpected '{}'", op));
          --depth;
        }
        tokens_.push_back({Token::kOp, op, line_});
        i += std::strlen(op);
      }
    }
  }

  // The end of the tag when its closing delimiter starts at i (whitespace control applied), or 0.
  size_t tag_end(bool variable, size_t i) {
    const char* close = variable ? "}}" : "%}";
    if (s_.compare(i, 3, std::string("-") + close) == 0) {
      i += 3;
      while (size_t n = space_at(s_, i)) i += n;
      return i;
    }
    if (!variable && s_.compare(i, 3, "+%}") == 0) return i + 3;
    if (s_.compare(i, 2, close) == 0) {
      i += 2;
      if (!variable && i < s_.size() && s_[i] == '\n') ++i;  // trim_blocks
      return i;
    }
    return 0;
  }

  size_t number(size_t i) {
    // Integers in base 2/8/16.
    if (s_[i] == '0' && i + 1 < s_.size() && std::strchr("xXoObB", s_[i + 1]) && s_[i + 1] != 0) {
      const char base = static_cast<char>(s_[i + 1] | 0x20);
      size_t j = i + 2;
      auto ok = [&](char ch) {
        ch = static_cast<char>(ch | 0x20);
        return base == 'x' ? hex_value(ch) >= 0 : base == 'o' ? (ch >= '0' && ch <= '7')
                                                              : (ch == '0' || ch == '1');
      };
      std::string digits;
      while (j < s_.size() && (ok(s_[j]) || (s_[j] == '_' && j + 1 < s_.size() && ok(s_[j + 1])))) {
        if (s_[j] != '_') digits += s_[j];
        ++j;
      }
      if (!digits.empty()) {
        tokens_.push_back({Token::kInt, std::string("0") + base + digits, line_});
        return j;
      }
    }
    size_t j = scan_digits(s_, i);
    bool is_float = false;
    // jinja2 reads no float right after a dot (x.0.1 is x . 0 . 1).
    const bool after_dot = i > 0 && s_[i - 1] == '.';
    if (after_dot) {
      tokens_.push_back({Token::kInt, s_.substr(i, j - i), line_});
      return j;
    }
    if (j + 1 < s_.size() && s_[j] == '.' && is_digit(s_[j + 1])) {
      j = scan_digits(s_, j + 1);
      is_float = true;
    }
    if (j < s_.size() && (s_[j] == 'e' || s_[j] == 'E')) {
      size_t k = j + 1;
      if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
      if (k < s_.size() && is_digit(s_[k])) {
        j = scan_digits(s_, k);
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = i; k < j; ++k)
      if (s_[k] != '_') text += s_[k];
    tokens_.push_back({is_float ? Token::kFloat : Token::kInt, text, line_});
    return j;
  }

  std::string s_;
  std::vector<Token> tokens_;
  int line_ = 1;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  // jinja2 normalizes \r\n and \r to \n and drops one trailing newline (keep_trailing_newline off).
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return Lexer(std::move(s)).run();
}

}  // namespace lmx::chat
