#include "properties/value_source.h"

#include <fmt/format.h>

namespace lmx::properties {

std::string ValueSource::describe() const {
  switch (kind) {
    case Kind::Default:
      return "default";
    case Kind::File:
      return fmt::format("line {} of {}", line, name);
    case Kind::Environment:
      return fmt::format("environment variable {}", name);
    case Kind::Alias:
      return fmt::format("environment variable {} (TGI alias)", name);
    case Kind::Override:
      return name;
  }
  return "?";
}

std::string_view to_string(ValueSource::Kind kind) {
  switch (kind) {
    case ValueSource::Kind::Default:
      return "default";
    case ValueSource::Kind::File:
      return "file";
    case ValueSource::Kind::Environment:
      return "environment";
    case ValueSource::Kind::Alias:
      return "alias";
    case ValueSource::Kind::Override:
      return "override";
  }
  return "?";
}

}  // namespace lmx::properties
