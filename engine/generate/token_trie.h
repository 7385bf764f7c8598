// The vocabulary as a byte trie, for constrained decoding: which token ids a recognizer state
// accepts in full. Built once per tokenizer (engine/generate/token_constraint.h shares it).
//
// Layout: the trie's nodes in depth-first preorder, each with its byte, its depth, the end of
// its subtree and the ids whose bytes end there. allowed() walks them once, keeping the state
// after each prefix on a stack indexed by depth, and skips a whole subtree as soon as its first
// byte is refused: its cost is the number of nodes whose prefix the state accepts.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/generate/json_recognizer.h"

namespace lmx {

class Tokenizer;

class TokenTrie {
 public:
  // Every id of the tokenizer, by Tokenizer::token_bytes.
  static TokenTrie of(const Tokenizer& tokenizer);

  // token_bytes[id]: the bytes token `id` adds to the text; nullopt or "" for a token that adds
  // none (special tokens), which allowed() never allows.
  explicit TokenTrie(std::vector<std::optional<std::string>> token_bytes);

  // mask: [vocab] with vocab >= the ids given; set to 1 where the state accepts every byte of
  // the token, 0 elsewhere (ids beyond the table included).
  void allowed(const JsonRecognizer& state, std::span<uint8_t> mask) const;

  // The bytes of `id` (nullptr when it has none).
  const std::string* bytes(int32_t id) const;
  size_t nodes() const { return nodes_.size(); }

 private:
  struct Node {
    uint8_t byte;
    uint16_t depth;      // 1 for a first byte
    uint32_t end;        // one past the last node of this subtree
    uint32_t ids_begin;  // ids_[ids_begin, next node's ids_begin): tokens ending here
  };
  std::vector<std::optional<std::string>> token_bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  size_t max_depth_ = 0;
};

}  // namespace lmx
