#include "properties/config_merge.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace lmx::properties {
namespace {

struct Candidate {
  RawValue value;
  int rank;   // source precedence, lower wins
  int order;  // tie-break within a rank, lower wins
};

int env_rank(EnvLayer layer) { return 2 + static_cast<int>(layer); }

}  // namespace

MergedSettings merge_sources(const std::vector<Override>& overrides, const PropertiesFile* file,
                             const std::vector<EnvSetting>& env,
                             const std::function<std::string(const std::string&)>& canonical) {
  std::map<std::string, std::vector<Candidate>> by_key;
  int order = 0;
  for (const Override& o : overrides) {
    ValueSource src{ValueSource::Kind::Override, o.origin, 0, o.value, ""};
    by_key[canonical(o.key)].push_back({{o.key, o.value, src}, 0, order++});
  }
  if (file != nullptr) {
    const int n = static_cast<int>(file->entries().size());
    for (int i = 0; i < n; ++i) {
      const PropertyEntry& e = file->entries()[static_cast<std::size_t>(i)];
      ValueSource src{ValueSource::Kind::File, file->origin(), e.line, e.value, ""};
      by_key[canonical(e.key)].push_back({{e.key, e.value, src}, 1, n - i});  // last one wins
    }
  }
  for (const EnvSetting& s : env) {
    const auto kind =
        s.layer == EnvLayer::Alias ? ValueSource::Kind::Alias : ValueSource::Kind::Environment;
    ValueSource src{kind, s.variable, 0, s.value, ""};
    by_key[canonical(s.key)].push_back({{s.key, s.value, src}, env_rank(s.layer), order++});
  }

  MergedSettings merged;
  for (auto& [key, candidates] : by_key) {
    const Candidate* best = &candidates.front();
    std::vector<int> file_lines;
    for (const Candidate& c : candidates) {
      if (c.value.source.kind == ValueSource::Kind::File) file_lines.push_back(c.value.source.line);
      if (c.rank < best->rank || (c.rank == best->rank && c.order < best->order)) best = &c;
    }
    if (file_lines.size() > 1) {
      merged.warnings.push_back(fmt::format(
          "{} is set {} times in {} (lines {}); the last one (line {}) wins", key,
          file_lines.size(), file->origin(), fmt::join(file_lines, ", "), file_lines.back()));
    }
    merged.values.emplace(key, best->value);
  }
  return merged;
}

}  // namespace lmx::properties
