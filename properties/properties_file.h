// Java-properties parser (the syntax of serving.properties), java.util.Properties.load semantics:
// `#`/`!` comment lines, `key=value`, `key: value`, `key value`, `key` alone (empty value),
// backslash line continuations (leading whitespace of the continued line is dropped), escapes
// (\t \n \r \f, \uXXXX incl. surrogate pairs -> UTF-8, any other `\c` -> `c`), LF/CR/CRLF line
// ends. Keys keep their case. Values keep trailing whitespace, as Java does; the typed layer trims.
// Each entry remembers the line its logical line starts on, for error messages.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace lmx::properties {

struct PropertyEntry {
  std::string key;
  std::string value;
  int line = 0;  // 1-based line where the logical line starts
};

class PropertiesFile {
 public:
  // `origin` names the text in errors and sources (usually the file path).
  static PropertiesFile parse(std::string_view text, std::string origin = "<string>");
  // Throws lmx::Error when the file cannot be read or is malformed (bad \u escape).
  static PropertiesFile load(const std::filesystem::path& path);

  const std::string& origin() const { return origin_; }
  // All entries in file order, duplicates included.
  const std::vector<PropertyEntry>& entries() const { return entries_; }
  // The entry that wins for `key` (the last one, as in Java), or nullptr. Case-sensitive.
  const PropertyEntry* find(std::string_view key) const;

 private:
  std::string origin_;
  std::vector<PropertyEntry> entries_;
};

}  // namespace lmx::properties
