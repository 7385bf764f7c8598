// Engine updates -> LMI stream chunks and responses. One GenerationState per input; it is fed
// the updates of that input's request in order (on the engine thread) and builds the JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/api/engine.h"

namespace lmx::plugin {

class GenerationState {
 public:
  GenerationState(std::string input, bool details, bool return_full_text)
      : input_(std::move(input)), details_(details), return_full_text_(return_full_text) {}

  // Records the update; returns the stream chunks it produces (the last one is final when
  // update.finished): {"token": {...}} per new token, the final chunk carries generated_text and
  // details (see plugin.h).
  std::vector<nlohmann::json> apply(const RequestUpdate& update);

  bool finished() const { return finished_; }
  FinishStatus finish_status() const { return finish_status_; }
  const std::string& error() const { return error_; }

  // {"generated_text", "details"?} for lmx_predict (after finished()).
  nlohmann::json response() const;

 private:
  nlohmann::json details_json(bool with_tokens) const;
  std::string generated_text() const;

  std::string input_;
  bool details_;
  bool return_full_text_;
  std::string text_;
  std::vector<GeneratedToken> tokens_;
  int prompt_tokens_ = 0;
  int generated_tokens_ = 0;
  bool finished_ = false;
  FinishStatus finish_status_ = FinishStatus::Length;
  std::string error_;
};

nlohmann::json token_json(const GeneratedToken& t, const std::string& text);

}  // namespace lmx::plugin
