// Constrained decoding: a per-sequence rule of which tokens may come next. The scheduler asks
// for the mask before each draw of a constrained sequence, redraws on the host among the allowed
// tokens (engine/generate/constrained_draw.h), and feeds the drawn token back. A sequence whose
// constraint is complete finishes (engine/scheduler/scheduler.cpp).
//
// JsonTokenConstraint: the text must be a JsonGrammar (prefix, one JSON value per a schema,
// suffix); tokens without bytes (special tokens, EOS included) are never allowed, so the text
// cannot end before the grammar does.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "engine/generate/json_recognizer.h"
#include "engine/generate/token_trie.h"

namespace lmx {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // mask: [vocab]; 1 where the token may come next, 0 elsewhere.
  virtual void allowed(std::span<uint8_t> mask) const = 0;
  // Moves on past a drawn token; false (state unchanged) when the token is not allowed.
  virtual bool accept(int32_t id) = 0;
  virtual bool complete() const = 0;
};

class JsonTokenConstraint final : public TokenConstraint {
 public:
  JsonTokenConstraint(std::shared_ptr<const JsonGrammar> grammar,
                      std::shared_ptr<const TokenTrie> vocab)
      : grammar_(std::move(grammar)), vocab_(std::move(vocab)), state_(*grammar_) {}

  void allowed(std::span<uint8_t> mask) const override { vocab_->allowed(state_, mask); }
  bool accept(int32_t id) override {
    const std::string* bytes = vocab_->bytes(id);
    JsonRecognizer next = state_;
    if (bytes == nullptr || !next.advance(*bytes)) return false;
    state_ = next;
    return true;
  }
  bool complete() const override { return state_.complete(); }

 private:
  std::shared_ptr<const JsonGrammar> grammar_;  // state_ points into it
  std::shared_ptr<const TokenTrie> vocab_;
  JsonRecognizer state_;
};

}  // namespace lmx
