// Java-properties syntax: every form java.util.Properties.load accepts, and its corner cases.
#include "properties/properties_file.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "engine/core/error.h"

namespace {

using lmx::properties::PropertiesFile;
using lmx::properties::PropertyEntry;

std::string value_of(const PropertiesFile& f, const std::string& key) {
  const PropertyEntry* e = f.find(key);
  EXPECT_NE(e, nullptr) << "missing key " << key;
  return e != nullptr ? e->value : "<missing>";
}

TEST(PropertiesFile, SeparatorForms) {
  const auto f = PropertiesFile::parse(
      "a=1\n"
      "b: 2\n"
      "c 3\n"
      "d   =   4\n"
      "e\t:\t5\n"
      "f\f6\n"
      "g =\n"
      "h\n"
      "   i=  9\n");
  EXPECT_EQ(value_of(f, "a"), "1");
  EXPECT_EQ(value_of(f, "b"), "2");
  EXPECT_EQ(value_of(f, "c"), "3");
  EXPECT_EQ(value_of(f, "d"), "4");
  EXPECT_EQ(value_of(f, "e"), "5");
  EXPECT_EQ(value_of(f, "f"), "6");
  EXPECT_EQ(value_of(f, "g"), "");
  EXPECT_EQ(value_of(f, "h"), "");
  EXPECT_EQ(value_of(f, "i"), "9");
  EXPECT_EQ(f.entries().size(), 9u);
}

TEST(PropertiesFile, SeparatorsInsideValuesAreKept) {
  const auto f = PropertiesFile::parse(
      "url=http://host:8080/a=b\n"
      "k = = x\n"
      "m : : y\n"
      "n key=value\n"
      "p=a b  c\n");
  EXPECT_EQ(value_of(f, "url"), "http://host:8080/a=b");
  EXPECT_EQ(value_of(f, "k"), "= x");  // only the first separator is consumed
  EXPECT_EQ(value_of(f, "m"), ": y");
  EXPECT_EQ(value_of(f, "n"), "key=value");  // whitespace separated the key
  EXPECT_EQ(value_of(f, "p"), "a b  c");
}

TEST(PropertiesFile, TrailingWhitespaceOfValueIsKept) {
  const auto f = PropertiesFile::parse("a=x  \t\n");
  EXPECT_EQ(value_of(f, "a"), "x  \t");
}

TEST(PropertiesFile, CommentsAndBlankLines) {
  const auto f = PropertiesFile::parse(
      "# comment=1\n"
      "! also=2\n"
      "   # indented=3\n"
      "\n"
      "   \t\n"
      "a=#not a comment\n"
      "b=x # not a comment either\n");
  ASSERT_EQ(f.entries().size(), 2u);
  EXPECT_EQ(value_of(f, "a"), "#not a comment");
  EXPECT_EQ(value_of(f, "b"), "x # not a comment either");
  EXPECT_EQ(f.find("comment"), nullptr);
  EXPECT_EQ(f.find("# comment"), nullptr);
}

TEST(PropertiesFile, CommentLinesDoNotContinue) {
  const auto f = PropertiesFile::parse("# a comment \\\nk=v\n");
  ASSERT_EQ(f.entries().size(), 1u);
  EXPECT_EQ(value_of(f, "k"), "v");
  EXPECT_EQ(f.entries()[0].line, 2);
}

TEST(PropertiesFile, LineContinuationDropsLeadingWhitespace) {
  const auto f = PropertiesFile::parse(
      "fruits = apple, banana, \\\n"
      "         pear, \\\n"
      "\t\tcantaloupe\n"
      "next=1\n");
  EXPECT_EQ(value_of(f, "fruits"), "apple, banana, pear, cantaloupe");
  EXPECT_EQ(f.entries()[0].line, 1);
  EXPECT_EQ(f.entries()[1].line, 4);
}

TEST(PropertiesFile, ContinuedLineStartingWithHashIsContent) {
  const auto f = PropertiesFile::parse("k=a\\\n  #b\n");
  EXPECT_EQ(value_of(f, "k"), "a#b");
}

TEST(PropertiesFile, ContinuationInsideKey) {
  const auto f = PropertiesFile::parse("option.\\\n   dtype=fp32\n");
  EXPECT_EQ(value_of(f, "option.dtype"), "fp32");
}

TEST(PropertiesFile, EvenBackslashesDoNotContinue) {
  const auto f = PropertiesFile::parse("a=x\\\\\nb=y\n");
  EXPECT_EQ(value_of(f, "a"), "x\\");
  EXPECT_EQ(value_of(f, "b"), "y");
}

TEST(PropertiesFile, OddBackslashesContinue) {
  const auto f = PropertiesFile::parse("a=x\\\\\\\n  y\n");
  EXPECT_EQ(value_of(f, "a"), "x\\y");
  EXPECT_EQ(f.entries().size(), 1u);
}

TEST(PropertiesFile, BlankLineAfterContinuationEndsTheEntry) {
  const auto f = PropertiesFile::parse("a=x\\\n   \nb=y\n");
  EXPECT_EQ(value_of(f, "a"), "x");
  EXPECT_EQ(value_of(f, "b"), "y");
  EXPECT_EQ(f.find("b")->line, 3);
}

TEST(PropertiesFile, ContinuationAtEndOfFile) {
  const auto f = PropertiesFile::parse("a=x\\");
  EXPECT_EQ(value_of(f, "a"), "x");
}

TEST(PropertiesFile, LineEndingsCrLfAndCr) {
  const auto crlf = PropertiesFile::parse("a=1\r\nb=2\r\nc=3\\\r\n   4\r\nd=5");
  EXPECT_EQ(value_of(crlf, "a"), "1");
  EXPECT_EQ(value_of(crlf, "b"), "2");
  EXPECT_EQ(value_of(crlf, "c"), "34");
  EXPECT_EQ(value_of(crlf, "d"), "5");
  EXPECT_EQ(crlf.find("d")->line, 5);

  const auto cr = PropertiesFile::parse("a=1\rb=2\r");
  EXPECT_EQ(value_of(cr, "a"), "1");
  EXPECT_EQ(value_of(cr, "b"), "2");
  EXPECT_EQ(cr.find("b")->line, 2);
}

TEST(PropertiesFile, Escapes) {
  const auto f = PropertiesFile::parse(
      "tab=a\\tb\n"
      "nl=a\\nb\n"
      "cr=a\\rb\n"
      "ff=a\\fb\n"
      "other=\\q\\z\n"
      "backslash=C:\\\\models\n"
      "lead=\\  two spaces\n");
  EXPECT_EQ(value_of(f, "tab"), "a\tb");
  EXPECT_EQ(value_of(f, "nl"), "a\nb");
  EXPECT_EQ(value_of(f, "cr"), "a\rb");
  EXPECT_EQ(value_of(f, "ff"), "a\fb");
  EXPECT_EQ(value_of(f, "other"), "qz");
  EXPECT_EQ(value_of(f, "backslash"), "C:\\models");
  EXPECT_EQ(value_of(f, "lead"), "  two spaces");
}

TEST(PropertiesFile, EscapedSeparatorsInKeys) {
  const auto f = PropertiesFile::parse(
      "a\\=b=c\n"
      "x\\:y:z\n"
      "with\\ space=v\n"
      "\\#hash=h\n");
  EXPECT_EQ(value_of(f, "a=b"), "c");
  EXPECT_EQ(value_of(f, "x:y"), "z");
  EXPECT_EQ(value_of(f, "with space"), "v");
  EXPECT_EQ(value_of(f, "#hash"), "h");
}

TEST(PropertiesFile, UnicodeEscapesBecomeUtf8) {
  const auto f = PropertiesFile::parse(
      "ascii=\\u0041\n"
      "two=\\u00e9\n"
      "three=\\u20AC\n"
      "pair=\\uD83D\\uDE00\n"
      "k\\u00e9y=v\n");
  EXPECT_EQ(value_of(f, "ascii"), "A");
  EXPECT_EQ(value_of(f, "two"), "\xC3\xA9");
  EXPECT_EQ(value_of(f, "three"), "\xE2\x82\xAC");
  EXPECT_EQ(value_of(f, "pair"), "\xF0\x9F\x98\x80");  // U+1F600
  EXPECT_EQ(value_of(f, "k\xC3\xA9y"), "v");
}

TEST(PropertiesFile, RawUtf8PassesThrough) {
  const auto f = PropertiesFile::parse("greeting=gr\xC3\xBC\xC3\x9F dich\n");
  EXPECT_EQ(value_of(f, "greeting"), "gr\xC3\xBC\xC3\x9F dich");
}

TEST(PropertiesFile, MalformedUnicodeEscapesAreErrorsWithLine) {
  const char* bad[] = {"a=1\nk=\\u12\n",    "a=1\nk=\\u12G4\n", "a=1\nk=\\uD83D\n",
                       "a=1\nk=\\uD83Dx\n", "a=1\nk=\\uDE00\n", "a=1\nk=\\uD83D\\u0041\n"};
  for (const char* text : bad) {
    try {
      PropertiesFile::parse(text, "serving.properties");
      ADD_FAILURE() << "no error for " << text;
    } catch (const lmx::Error& e) {
      EXPECT_NE(std::string(e.what()).find("serving.properties:2"), std::string::npos) << e.what();
    }
  }
}

TEST(PropertiesFile, KeysArePreservedCaseSensitively) {
  const auto f = PropertiesFile::parse("option.entryPoint=x\noption.entrypoint=y\n");
  EXPECT_EQ(value_of(f, "option.entryPoint"), "x");
  EXPECT_EQ(value_of(f, "option.entrypoint"), "y");
  EXPECT_EQ(f.entries()[0].key, "option.entryPoint");
}

TEST(PropertiesFile, LastDuplicateWinsAndAllAreKept) {
  const auto f = PropertiesFile::parse("a=1\nb=2\na=3\n");
  EXPECT_EQ(value_of(f, "a"), "3");
  EXPECT_EQ(f.find("a")->line, 3);
  EXPECT_EQ(f.entries().size(), 3u);
}

TEST(PropertiesFile, ByteOrderMarkIsSkipped) {
  const auto f = PropertiesFile::parse(
      "\xEF\xBB\xBF"
      "engine=Python\n");
  EXPECT_EQ(value_of(f, "engine"), "Python");
}

TEST(PropertiesFile, EmptyInput) {
  EXPECT_TRUE(PropertiesFile::parse("").entries().empty());
  EXPECT_TRUE(PropertiesFile::parse("\n\n# only comments\n").entries().empty());
}

TEST(PropertiesFile, LineNumbersCountEveryNaturalLine) {
  const auto f = PropertiesFile::parse("# c\n\na=1\\\n 2\\\n 3\nb=4\n");
  EXPECT_EQ(f.find("a")->line, 3);
  EXPECT_EQ(f.find("b")->line, 6);
  EXPECT_EQ(value_of(f, "a"), "123");
}

TEST(PropertiesFile, LoadReadsFileAndNamesItAsOrigin) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("lmx_props_load_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "serving.properties";
  {
    std::ofstream out(path, std::ios::binary);
    out << "option.dtype=fp32\r\n";
  }
  const auto f = PropertiesFile::load(path);
  EXPECT_EQ(f.origin(), path.string());
  EXPECT_EQ(value_of(f, "option.dtype"), "fp32");
  std::filesystem::remove_all(dir);
}

TEST(PropertiesFile, LoadOfMissingFileIsAnError) {
  EXPECT_THROW(PropertiesFile::load("/nonexistent/lmx/serving.properties"), lmx::Error);
}

}  // namespace
