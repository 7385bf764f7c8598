// The Hugging Face parity fixtures (tests/fixtures/parity/, made by
// scripts/make_parity_fixtures.py): names, expected outputs and model directories.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
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

// Logits against a fixture's reference vector: max|ours - hf| <= rel_tol * max|hf|.
inline void expect_logits_near(const std::vector<float>& ours, const nlohmann::json& hf,
                               double rel_tol, const std::string& where) {
  const auto ref = hf.get<std::vector<double>>();
  ASSERT_EQ(ours.size(), ref.size()) << where;
  double max_ref = 0, max_err = 0;
  for (size_t v = 0; v < ref.size(); ++v) {
    max_ref = std::max(max_ref, std::abs(ref[v]));
    max_err = std::max(max_err, std::abs(ours[v] - ref[v]));
  }
  EXPECT_LE(max_err, rel_tol * max_ref) << where << ": max abs error " << max_err
                                        << " vs max |logit| " << max_ref;
}

// A case's logits against its fixture: the last prompt position and every recorded decode step
// (result of a request with return_prompt_logits and return_step_logits = step_logits(case)).
inline int step_logits(const nlohmann::json& c) { return int(c.at("step_logits").size()); }
template <typename Result>
void expect_case_logits_near(const Result& r, const nlohmann::json& c, double rel_tol) {
  expect_logits_near(r.prompt_logits, c["last_prompt_logits"], rel_tol, "last prompt position");
  const nlohmann::json& steps = c.at("step_logits");
  ASSERT_EQ(r.step_logits.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i)
    expect_logits_near(r.step_logits[i], steps[i], rel_tol, "decode step " + std::to_string(i + 1));
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
