// Loading: tokenizer.json + tokenizer_config.json, or the legacy GPT-2 vocab.json + merges.txt
// pair (converted to the equivalent tokenizer.json), into a Tokenizer::Impl.
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_impl.h"

namespace lmx {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw_error("tokenizer: cannot read {}", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json parse(const std::string& text, std::string_view what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_error("tokenizer: {} is not valid JSON: {}", what, e.what());
  }
}

// "bos_token": "<s>" or {"content": "<s>", ...}
std::optional<std::string> config_token(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const auto& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return std::nullopt;
}

std::optional<int32_t> config_token_id(const Tokenizer::Impl& impl, const nlohmann::json& config,
                                       const char* key) {
  auto t = config_token(config, key);
  if (!t) return std::nullopt;
  auto id = impl.token_to_id(*t);
  if (!id)
    throw_error("tokenizer: tokenizer_config.json {} '{}' is not in the vocabulary", key, *t);
  return id;
}

// GPT-2's layout as the tokenizer.json it is equivalent to.
nlohmann::json legacy_gpt2_json(const std::filesystem::path& dir, const nlohmann::json& config) {
  nlohmann::json vocab = parse(read_file(dir / "vocab.json"), (dir / "vocab.json").string());
  nlohmann::json merges = nlohmann::json::array();
  std::istringstream lines(read_file(dir / "merges.txt"));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    merges.push_back(line);
  }
  const bool prefix = config.is_object() && config.value("add_prefix_space", false);
  nlohmann::json added = nlohmann::json::array();
  if (vocab.contains("<|endoftext|>")) {
    added.push_back({{"id", vocab.at("<|endoftext|>")},
                     {"content", "<|endoftext|>"},
                     {"special", true},
                     {"normalized", false}});
  }
  return {
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(merges)}}}};
}

}  // namespace

std::shared_ptr<const Tokenizer::Impl> build_tokenizer(const nlohmann::json& tj,
                                                       const nlohmann::json& config) {
  if (!tj.is_object() || !tj.contains("model"))
    throw_error("tokenizer: tokenizer.json has no \"model\" section");
  auto impl = std::make_shared<Tokenizer::Impl>();
  auto field = [&](const char* k) { return tj.contains(k) ? tj.at(k) : nlohmann::json(); };
  impl->normalizer = tok::make_normalizer(field("normalizer"));
  impl->pre_tokenizer = tok::make_pre_tokenizer(field("pre_tokenizer"));
  impl->model = tok::make_model(tj.at("model"));
  impl->post_processor = tok::make_post_processor(field("post_processor"));
  impl->decoder = tok::make_decoder(field("decoder"));
  for (const auto& a :
       field("added_tokens").is_array() ? field("added_tokens") : nlohmann::json::array()) {
    impl->added.push_back(tok::parse_added_token(a));
    impl->added_by_id[impl->added.back().id] = impl->added.size() - 1;
    impl->added_by_content[impl->added.back().content] = impl->added.back().id;
  }
  for (auto& a : impl->added) {
    a.decoded = a.content;
    if (a.normalized && impl->normalizer) impl->normalizer->normalize(a.decoded);
  }
  for (auto& a : impl->added)
    for (const auto& b : impl->added)
      a.skip_as_special = a.skip_as_special || (b.special && b.content == a.decoded);
  impl->raw_matcher = tok::AddedTokenMatcher(impl->added, false, impl->normalizer.get());
  impl->normalized_matcher = tok::AddedTokenMatcher(impl->added, true, impl->normalizer.get());

  impl->bos = config_token_id(*impl, config, "bos_token");
  impl->eos = config_token_id(*impl, config, "eos_token");
  impl->pad = config_token_id(*impl, config, "pad_token");
  if (config.is_object() && config.contains("chat_template")) {
    const auto& ct = config.at("chat_template");
    if (ct.is_string()) {
      impl->chat_template = ct.get<std::string>();
    } else if (ct.is_array()) {  // [{"name": "default", "template": ...}, ...]
      for (const auto& t : ct)
        if (t.value("name", "") == "default") impl->chat_template = t.value("template", "");
    }
  }
  // transformers rebuilds a SentencePiece-style template from add_bos_token/add_eos_token; do
  // the same when the config says so and tokenizer.json has no other kind of post-processor.
  const bool has_flags =
      config.is_object() && (config.contains("add_bos_token") || config.contains("add_eos_token"));
  const std::string pp_type =
      field("post_processor").is_object() ? field("post_processor").value("type", "") : "";
  if (has_flags && (pp_type.empty() || pp_type == "TemplateProcessing")) {
    std::vector<int32_t> before, after;
    if (config.value("add_bos_token", false) && impl->bos) before.push_back(*impl->bos);
    if (config.value("add_eos_token", false) && impl->eos) after.push_back(*impl->eos);
    impl->post_processor = tok::make_bos_eos_processor(std::move(before), std::move(after));
  }
  return impl;
}

Tokenizer Tokenizer::from_json(const std::string& tokenizer_json,
                               const std::string& tokenizer_config_json) {
  const nlohmann::json tj = parse(tokenizer_json, "tokenizer.json");
  const nlohmann::json config = tokenizer_config_json.empty()
                                    ? nlohmann::json()
                                    : parse(tokenizer_config_json, "tokenizer_config.json");
  if (!tj.is_object()) throw_error("tokenizer: tokenizer.json must be a JSON object");
  if (!config.is_null() && !config.is_object())
    throw_error("tokenizer: tokenizer_config.json must be a JSON object");
  try {
    return Tokenizer(build_tokenizer(tj, config));
  } catch (const nlohmann::json::exception& e) {
    // A field of the wrong JSON type somewhere in the file: say so in the user's terms, without
    // the library's "[json.exception.type_error.302]" prefix.
    std::string what = e.what();
    if (const size_t end = what.find("] "); what.rfind("[json.exception.", 0) == 0 && end != std::string::npos)
      what = what.substr(end + 2);
    throw_error("tokenizer: a field of tokenizer.json or tokenizer_config.json has the wrong JSON "
                "type for a Hugging Face tokenizer ({})", what);
  }
}

Tokenizer Tokenizer::from_model_dir(const std::filesystem::path& dir) {
  const auto config_path = dir / "tokenizer_config.json";
  const std::string config_text =
      std::filesystem::exists(config_path) ? read_file(config_path) : "";
  if (std::filesystem::exists(dir / "tokenizer.json")) {
    try {
      return from_json(read_file(dir / "tokenizer.json"), config_text);
    } catch (const Error& e) {
      throw_error("{} (loading {})", e.what(), (dir / "tokenizer.json").string());
    }
  }
  if (std::filesystem::exists(dir / "vocab.json") && std::filesystem::exists(dir / "merges.txt")) {
    const nlohmann::json config =
        config_text.empty() ? nlohmann::json() : parse(config_text, "tokenizer_config.json");
    nlohmann::json cfg = config;
    if (!cfg.is_object()) cfg = nlohmann::json::object();
    // GPT-2 has one special token that is bos, eos and unk at once.
    if (!cfg.contains("bos_token")) cfg["bos_token"] = "<|endoftext|>";
    if (!cfg.contains("eos_token")) cfg["eos_token"] = "<|endoftext|>";
    return Tokenizer(build_tokenizer(legacy_gpt2_json(dir, config), cfg));
  }
  throw_error("tokenizer: {} has neither tokenizer.json nor vocab.json + merges.txt", dir.string());
}

}  // namespace lmx
