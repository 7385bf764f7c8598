// Randomized: keys and values written the way java.util.Properties.store() escapes them, split
// with random continuations and separators, must parse back exactly; arbitrary bytes must either
// parse or fail with lmx::Error (never crash or hang).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/core/utf8.h"
#include "properties/properties_file.h"

namespace {

using lmx::properties::PropertiesFile;

// Code points the generator draws from: separators, escape-worthy ASCII, 2/3/4-byte UTF-8.
const std::vector<std::uint32_t> kAlphabet = {
    'a',  'b', 'Z', '0', '9', '.',  '_', '-',  '/',   ' ',    '\t',   '\n',    '\r',
    '\f', '=', ':', '#', '!', '\\', 'u', 0xE9, 0x3B1, 0x20AC, 0x4E2D, 0x1F600, 0x10348};

// Escapes one code point as Properties.store() would (keys escape every space, values only a
// leading one); non-ASCII alternates between \uXXXX escapes and raw UTF-8.
std::string escape(std::uint32_t cp, bool is_key, bool first, bool unicode_escape) {
  switch (cp) {
    case ' ':
      return (is_key || first) ? "\\ " : " ";
    case '\t':
      return "\\t";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\f':
      return "\\f";
    case '=':
    case ':':
    case '#':
    case '!':
    case '\\':
      return std::string("\\") + char(cp);
    default:
      break;
  }
  std::string out;
  if (cp < 0x80 || !unicode_escape) {
    lmx::append_utf8(out, char32_t(cp));
  } else if (cp < 0x10000) {
    out = fmt::format("\\u{:04X}", cp);
  } else {
    const std::uint32_t v = cp - 0x10000;
    out = fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
  }
  return out;
}

TEST(PropertiesRoundTrip, StoreEscapedEntriesParseBack) {
  std::mt19937 rng(20240611);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const char* separators[] = {"=", ":", " ", " = ", "\t: ", "  "};
  for (int round = 0; round < 300; ++round) {
    std::string text;
    std::vector<std::pair<std::string, std::string>> expected;
    std::vector<int> lines;
    int line = 1;
    const int entries = 1 + pick(5);
    for (int e = 0; e < entries; ++e) {
      if (pick(3) == 0) {  // comment or blank line in between
        text += pick(2) ? "# a comment \\\n" : "   \n";
        ++line;
      }
      std::string key, value;
      std::vector<std::string> tokens;  // escaped pieces; continuations go between them
      const int key_len = 1 + pick(6);
      for (int i = 0; i < key_len; ++i) {
        const std::uint32_t cp = kAlphabet[static_cast<std::size_t>(pick(int(kAlphabet.size())))];
        lmx::append_utf8(key, char32_t(cp));
        tokens.push_back(escape(cp, true, i == 0, pick(2) == 0));
      }
      tokens.push_back(separators[pick(6)]);
      const std::size_t sep_index = tokens.size() - 1;
      const int value_len = pick(8);
      for (int i = 0; i < value_len; ++i) {
        const std::uint32_t cp = kAlphabet[static_cast<std::size_t>(pick(int(kAlphabet.size())))];
        lmx::append_utf8(value, char32_t(cp));
        tokens.push_back(escape(cp, false, i == 0, pick(2) == 0));
      }
      expected.emplace_back(key, value);
      lines.push_back(line);
      for (std::size_t t = 0; t < tokens.size(); ++t) {
        // Continue the line before a token that does not start with whitespace (a continued
        // line loses its leading whitespace) and not next to the separator.
        const bool can_break = t > 0 && t != sep_index && t != sep_index + 1 &&
                               tokens[t][0] != ' ' && tokens[t][0] != '\t';
        if (can_break && pick(4) == 0) {
          text += pick(2) ? "\\\n" : "\\\r\n";
          text += std::string(static_cast<std::size_t>(pick(3)), ' ');
          ++line;
        }
        text += tokens[t];
      }
      text += pick(3) == 0 ? "\r\n" : "\n";
      ++line;
    }
    SCOPED_TRACE(text);
    const PropertiesFile f = PropertiesFile::parse(text);
    ASSERT_EQ(f.entries().size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(f.entries()[i].key, expected[i].first);
      EXPECT_EQ(f.entries()[i].value, expected[i].second);
      EXPECT_EQ(f.entries()[i].line, lines[i]);
    }
  }
}

TEST(PropertiesRoundTrip, ArbitraryBytesParseOrFailCleanly) {
  std::mt19937 rng(7);
  const std::string alphabet = "\\u=: \t\f\r\n#!aD8E0F9\xC3\xA9\xFF";
  int errors = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const int len = static_cast<int>(rng() % 64);
    for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    try {
      const PropertiesFile f = PropertiesFile::parse(text);
      for (const auto& e : f.entries()) EXPECT_GE(e.line, 1);
    } catch (const lmx::Error&) {
      ++errors;  // malformed \u escapes
    }
  }
  EXPECT_GT(errors, 0);  // the alphabet does produce malformed escapes: the error path ran
}

}  // namespace
