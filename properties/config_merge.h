// Merges the raw (untyped) settings of all sources into one winning value per key, by precedence:
// overrides > serving.properties > OPTION_*/SERVING_* > named LMI variables > TGI aliases.
// Within serving.properties the last occurrence wins (as in Java); within the environment the
// first variable of env_source's fixed order wins.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "properties/env_source.h"
#include "properties/properties_file.h"
#include "properties/value_source.h"

namespace lmx::properties {

// Extra settings from the caller (e.g. the plugin's create call); they win over everything.
struct Override {
  std::string key;  // property key, e.g. "option.max_tokens"
  std::string value;
  std::string origin = "override";  // shown as the source
};

struct RawValue {
  std::string key;   // key as written by its source (case preserved)
  std::string text;  // untrimmed value
  ValueSource source;
};

struct MergedSettings {
  std::map<std::string, RawValue> values;  // canonical key -> winning value
  std::vector<std::string> warnings;       // e.g. a key set twice in serving.properties
};

// `canonical` maps a key as written to the key used for merging (known keys: lower-case).
// `file` may be null (no serving.properties).
MergedSettings merge_sources(const std::vector<Override>& overrides, const PropertiesFile* file,
                             const std::vector<EnvSetting>& env,
                             const std::function<std::string(const std::string&)>& canonical);

}  // namespace lmx::properties
