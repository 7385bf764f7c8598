#include "tests/tokenizer/test_support.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace lmx::test {

std::filesystem::path tokenizer_cache_dir() {
  if (const char* env = std::getenv("LMX_TOKENIZER_CACHE"); env && *env) return env;
  if (const char* env = std::getenv("LMX_CACHE_DIR"); env && *env)
    return std::filesystem::path(env) / "tokenizers";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/root") / ".cache" / "lmx" / "tokenizers";
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

// Same patch as llama2_metaspace() in scripts/make_tokenizer_fixtures.py.
Tokenizer load_llama2_metaspace() {
  const std::filesystem::path dir = tokenizer_cache_dir() / "llama2";
  if (!std::filesystem::exists(dir / "tokenizer.json"))
    throw std::runtime_error(
        "tokenizer files for 'llama2' are missing from " + dir.string() +
        ": run `bash scripts/fetch_tokenizers.sh` (or set LMX_TOKENIZER_CACHE)");
  nlohmann::json j = nlohmann::json::parse(read_text(dir / "tokenizer.json"));
  const nlohmann::json metaspace = {{"type", "Metaspace"},
                                    {"replacement", "\u2581"},
                                    {"prepend_scheme", "first"},
                                    {"split", false}};
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = metaspace;
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", {metaspace, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  return Tokenizer::from_json(j.dump(), "");
}

}  // namespace

Tokenizer load_named_tokenizer(const std::string& name) {
  if (name == "llama2_metaspace") return load_llama2_metaspace();
  const std::filesystem::path fixtures = std::filesystem::path(LMX_FIXTURES_DIR) / "tokenizer";
  if (name.rfind("synth_", 0) == 0)
    return Tokenizer::from_json(read_text(fixtures / (name + ".tokenizer.json")), "");
  const std::filesystem::path shared = std::filesystem::path(LMX_SHARED_MODELS_DIR) / name;
  if (std::filesystem::exists(shared / "tokenizer.json")) return Tokenizer::from_model_dir(shared);
  const std::filesystem::path dir = tokenizer_cache_dir() / name;
  if (!std::filesystem::exists(dir / "tokenizer.json") &&
      !std::filesystem::exists(dir / "vocab.json"))
    throw std::runtime_error(
        "tokenizer files for '" + name + "' are missing from " + dir.string() +
        ": run `bash scripts/fetch_tokenizers.sh` (or set LMX_TOKENIZER_CACHE)");
  return Tokenizer::from_model_dir(dir);
}

nlohmann::json load_fixture(const std::string& name) {
  return nlohmann::json::parse(
      read_text(std::filesystem::path(LMX_FIXTURES_DIR) / "tokenizer" / (name + ".json")));
}

std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids,
                          bool skip_special) {
  StreamDecoder stream(tok, skip_special);
  std::string out;
  for (int32_t id : ids) out += stream.push(id);
  return out + stream.finish();
}

}  // namespace lmx::test
