// LMX's tokenizer: loads what Hugging Face model directories ship (tokenizer.json with
// tokenizer_config.json, or GPT-2's vocab.json + merges.txt) and encodes/decodes id for id like
// the `tokenizers` library. A Tokenizer is an immutable handle: copies share one loaded state,
// and encode/decode are const and safe to call from many threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lmx {

class Tokenizer {
 public:
  // tokenizer.json (+ tokenizer_config.json when present), else vocab.json + merges.txt.
  static Tokenizer from_model_dir(const std::filesystem::path& dir);
  // tokenizer_config_json may be empty.
  static Tokenizer from_json(const std::string& tokenizer_json,
                             const std::string& tokenizer_config_json);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One past the largest id of the model vocabulary and the added tokens (embedding rows needed).
  int32_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // "" for an unknown id

  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  bool is_special(int32_t id) const;
  // The bytes a token adds to the decoded text in the middle of a sequence (not its first
  // token, whose leading space a SentencePiece decoder drops): the byte-level alphabet mapped
  // back, "<0xNN>" byte-fallback tokens as their byte, "\u2581" as a space, an added token as its
  // content. nullopt for special tokens and ids without a token (engine/tokenizer/token_bytes.cpp).
  std::optional<std::string> token_bytes(int32_t id) const;
  const std::string& chat_template() const;  // "" when the model has none

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Incremental detokenization for streaming: push() returns only the text that the new token
// completes (never half a UTF-8 character; SentencePiece's leading-space rule kept), and the
// concatenation of all push() results and finish() equals decode() of all ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  std::string push(int32_t id);
  std::string finish();  // flushes text held back (e.g. an unfinished byte sequence)

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // the window: context token(s) + tokens not yet emitted
  std::string prefix_;        // decode of ids_[0, prefix_index_)
  size_t prefix_index_ = 0;
};

}  // namespace lmx
