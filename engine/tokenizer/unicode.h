// UTF-8 helpers and the few Unicode properties the tokenizer components need (normalization
// forms, case mapping, general categories). Normalization, case mapping and categories come from
// ICU, which the build requires.
#pragma once

#include "engine/core/utf8.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace lmx::tok {

// Decodes the code point at s[i] and advances i. Malformed input yields U+FFFD and skips one byte.
char32_t next_codepoint(std::string_view s, size_t& i);
// Byte length of the UTF-8 sequence that starts with lead byte b (1 for continuation/invalid).
inline size_t utf8_len(unsigned char b) {
  return b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
}
size_t count_codepoints(std::string_view s);
// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);
bool valid_utf8(std::string_view s);
// True when s ends in the middle of a UTF-8 sequence that more bytes could still complete.
bool ends_with_incomplete_utf8(std::string_view s);

enum class NormForm { kNFC, kNFD, kNFKC, kNFKD };
std::string normalize(std::string_view s, NormForm form);
std::string to_lower(std::string_view s);  // full Unicode lowercase mapping

bool is_whitespace(char32_t cp);       // Unicode White_Space (Rust char::is_whitespace)
bool is_control(char32_t cp);          // BERT's notion: category C*, except \t \n \r
bool is_punctuation(char32_t cp);      // ASCII punctuation or category P*
bool is_mark_nonspacing(char32_t cp);  // category Mn
bool is_mark(char32_t cp);             // category M (Mn, Mc, Me)
bool is_chinese_char(char32_t cp);     // the CJK blocks BERT pads with spaces
bool is_alphanumeric(char32_t cp);     // letters and numbers (Rust char::is_alphanumeric)

// GPT-2's byte <-> printable code point table used by the ByteLevel components.
const std::string& byte_to_unicode(unsigned char b);  // UTF-8 of the mapped code point
int unicode_to_byte(char32_t cp);                     // -1 when cp is not in the table

}  // namespace lmx::tok
