// Where one configuration value came from: a default, a line of serving.properties, an
// environment variable (LMI-native or TGI alias), or a caller override.
#pragma once

#include <string>
#include <string_view>

namespace lmx::properties {

struct ValueSource {
  enum class Kind { Default, File, Environment, Alias, Override };
  Kind kind = Kind::Default;
  std::string name;  // file path, environment variable or override origin; empty for defaults
  int line = 0;      // for Kind::File
  std::string raw;   // the text as written (empty for defaults)
  std::string note;  // how the value was derived, e.g. "max = 4 visible GPUs"

  // "line 3 of /m/serving.properties", "environment variable OPTION_DTYPE",
  // "environment variable SM_NUM_GPUS (TGI alias)", "plugin override", "default"
  std::string describe() const;
};

std::string_view to_string(ValueSource::Kind kind);  // "default", "file", "environment", ...

}  // namespace lmx::properties
