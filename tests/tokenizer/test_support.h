// Where the tokenizer tests find their inputs: committed fixtures, the shared models, and the
// npm-fetched cache of real tokenizer files (scripts/fetch_tokenizers.sh).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"

namespace lmx::test {

std::filesystem::path tokenizer_cache_dir();
// Loads the tokenizer a fixture is named after; throws with a message saying how to fetch it.
Tokenizer load_named_tokenizer(const std::string& name);
nlohmann::json load_fixture(const std::string& name);
std::string read_text(const std::filesystem::path& p);
// Stream-decodes ids one at a time and returns the concatenation.
std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special);

}  // namespace lmx::test
