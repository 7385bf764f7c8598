// The Hugging Face parity fixtures (tests/fixtures/parity/, made by
// scripts/make_parity_fixtures.py): names, expected outputs and model directories.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/paths.h"

namespace lmx::testing {

inline std::filesystem::path parity_dir() { return std::filesystem::path(LMX_FIXTURES_DIR) / "parity"; }

inline std::vector<std::string> parity_fixture_names() {
  std::vector<std::string> names;
  if (!std::filesystem::is_directory(parity_dir())) return names;
  for (const auto& e : std::filesystem::directory_iterator(parity_dir()))
    if (std::filesystem::exists(e.path() / "expected.json")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

struct ParityFixture {
  nlohmann::json expected;
  std::filesystem::path model_dir;
};

inline ParityFixture open_parity_fixture(const std::string& name) {
  ParityFixture f;
  std::ifstream in(parity_dir() / name / "expected.json");
  f.expected = nlohmann::json::parse(in);
  // Real models keep only expected.json here; their weights are in ../shared/models.
  f.model_dir = f.expected.contains("model")
                    ? shared_models_dir() / f.expected["model"].get<std::string>()
                    : parity_dir() / name;
  return f;
}

// GoogleTest parameter names: fixture names with every non-alphanumeric character as '_'.
struct ParityNamePrinter {
  template <typename Info>
  std::string operator()(const Info& param_info) const {
    std::string n = param_info.param;
    for (char& ch : n)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return n;
  }
};

}  // namespace lmx::testing
