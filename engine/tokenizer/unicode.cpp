#include "engine/tokenizer/unicode.h"

#include <array>
#include <vector>

#include "engine/core/error.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

namespace lmx::tok {

char32_t next_codepoint(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const size_t n = utf8_len(b0);
  if (n == 1 || i + n > s.size()) {
    ++i;
    return b0 < 0x80 ? b0 : 0xFFFD;
  }
  char32_t cp = b0 & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i += n;
  return cp;
}

size_t count_codepoints(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 with `bad` = the length of the maximal
// invalid prefix (at least 1), following the Unicode "maximal subpart" rule Rust uses.
size_t valid_sequence(std::string_view s, size_t i, size_t& bad) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  bad = 1;
  if (b0 < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) {
      bad = k;
      return 0;
    }
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      bad = k;
      return 0;
    }
  }
  return n;
}

}  // namespace

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t bad;
    const size_t n = valid_sequence(bytes, i, bad);
    if (n) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t bad;
    const size_t n = valid_sequence(s, i, bad);
    if (!n) return false;
    i += n;
  }
  return true;
}

bool ends_with_incomplete_utf8(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto b = static_cast<unsigned char>(s[s.size() - back]);
    if ((b & 0xC0) == 0x80) continue;
    size_t bad;
    return valid_sequence(s, s.size() - back, bad) == 0 && bad == back && utf8_len(b) > back;
  }
  return false;
}

namespace {

std::u16string to_u16(std::string_view s) {
  std::u16string out(s.size() + 1, u'\0');
  int32_t len = 0;
  UErrorCode err = U_ZERO_ERROR;
  u_strFromUTF8WithSub(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &len,
                       s.data(), static_cast<int32_t>(s.size()), 0xFFFD, nullptr, &err);
  if (U_FAILURE(err)) throw_error("tokenizer: UTF-8 to UTF-16 conversion failed");
  out.resize(static_cast<size_t>(len));
  return out;
}

std::string to_u8(const std::u16string& s) {
  std::string out(s.size() * 3 + 1, '\0');
  int32_t len = 0;
  UErrorCode err = U_ZERO_ERROR;
  u_strToUTF8WithSub(out.data(), static_cast<int32_t>(out.size()), &len,
                     reinterpret_cast<const UChar*>(s.data()), static_cast<int32_t>(s.size()),
                     0xFFFD, nullptr, &err);
  if (U_FAILURE(err)) throw_error("tokenizer: UTF-16 to UTF-8 conversion failed");
  out.resize(static_cast<size_t>(len));
  return out;
}

}  // namespace

std::string normalize(std::string_view s, NormForm form) {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* n = form == NormForm::kNFC    ? unorm2_getNFCInstance(&err)
                          : form == NormForm::kNFD  ? unorm2_getNFDInstance(&err)
                          : form == NormForm::kNFKC ? unorm2_getNFKCInstance(&err)
                                                    : unorm2_getNFKDInstance(&err);
  if (U_FAILURE(err)) throw_error("tokenizer: ICU normalizer unavailable");
  const std::u16string in = to_u16(s);
  std::u16string out(in.size() * 4 + 16, u'\0');
  for (;;) {
    err = U_ZERO_ERROR;
    const int32_t len = unorm2_normalize(
        n, reinterpret_cast<const UChar*>(in.data()), static_cast<int32_t>(in.size()),
        reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &err);
    if (err == U_BUFFER_OVERFLOW_ERROR) {
      out.resize(static_cast<size_t>(len) + 1);
      continue;
    }
    if (U_FAILURE(err)) throw_error("tokenizer: ICU normalization failed");
    out.resize(static_cast<size_t>(len));
    return to_u8(out);
  }
}

std::string to_lower(std::string_view s) {
  const std::u16string in = to_u16(s);
  std::u16string out(in.size() * 3 + 16, u'\0');
  UErrorCode err = U_ZERO_ERROR;
  const int32_t len = u_strToLower(
      reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()),
      reinterpret_cast<const UChar*>(in.data()), static_cast<int32_t>(in.size()), "", &err);
  if (U_FAILURE(err)) throw_error("tokenizer: ICU lowercase failed");
  out.resize(static_cast<size_t>(len));
  return to_u8(out);
}

bool is_whitespace(char32_t cp) {
  return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE);
}
bool is_control(char32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  const int8_t t = u_charType(static_cast<UChar32>(cp));
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_SURROGATE || t == U_PRIVATE_USE_CHAR ||
         t == U_UNASSIGNED;
}
bool is_punctuation(char32_t cp) {
  if (cp < 0x80)
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
           (cp >= 123 && cp <= 126);
  return u_ispunct(static_cast<UChar32>(cp));
}
bool is_mark_nonspacing(char32_t cp) {
  return u_charType(static_cast<UChar32>(cp)) == U_NON_SPACING_MARK;
}
bool is_mark(char32_t cp) {
  return (U_MASK(u_charType(static_cast<UChar32>(cp))) & U_GC_M_MASK) != 0;
}
bool is_alphanumeric(char32_t cp) {
  const uint32_t mask = U_GC_L_MASK | U_GC_N_MASK;
  return (U_MASK(u_charType(static_cast<UChar32>(cp))) & mask) != 0;
}

bool is_chinese_char(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

namespace {

struct ByteTable {
  std::array<std::string, 256> to_unicode;
  std::vector<int> to_byte;  // indexed by code point, up to 0x200
  ByteTable() : to_byte(0x200, -1) {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(to_unicode[static_cast<size_t>(b)], cp);
      to_byte[cp] = b;
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

}  // namespace

const std::string& byte_to_unicode(unsigned char b) { return byte_table().to_unicode[b]; }
int unicode_to_byte(char32_t cp) {
  const auto& t = byte_table().to_byte;
  return cp < t.size() ? t[cp] : -1;
}

}  // namespace lmx::tok
