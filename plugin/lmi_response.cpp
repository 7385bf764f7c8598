#include "plugin/lmi_response.h"

#include <cmath>

namespace lmx::plugin {

using nlohmann::json;

namespace {

// -inf log-probs (a token with zero probability under sampling filters) are not valid JSON.
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -1e30; }

}  // namespace

json token_json(const GeneratedToken& t, const std::string& text) {
  json j{{"id", t.id}, {"text", text}, {"log_prob", finite_logprob(t.logprob)},
         {"special", t.special}};
  if (!t.top.empty()) {  // parameters.top_n_tokens: most likely first
    json top = json::array();
    for (const TopToken& a : t.top)
      top.push_back(json{{"id", a.id}, {"text", a.text}, {"log_prob", finite_logprob(a.logprob)},
                         {"special", a.special}});
    j["top_tokens"] = std::move(top);
  }
  return j;
}

std::vector<json> GenerationState::apply(const RequestUpdate& u) {
  std::vector<json> chunks;
  if (finished_) return chunks;
  prompt_tokens_ = u.prompt_tokens;
  generated_tokens_ = u.generated_tokens;
  text_ += u.text_delta;
  // One chunk per token. The update's complete text delta (stop-sequence safe) rides on its last
  // token, so the chunks' texts always concatenate to the generated text.
  for (size_t i = 0; i < u.tokens.size(); ++i) {
    tokens_.push_back(u.tokens[i]);
    bool last = i + 1 == u.tokens.size();
    chunks.push_back(json{{"token", token_json(u.tokens[i], last ? u.text_delta : "")}});
  }
  if (u.tokens.empty() && !u.text_delta.empty()) {
    // Text released without a new token (held back for a possible stop sequence).
    chunks.push_back(json{
        {"token",
         json{
             {"id", nullptr}, {"text", u.text_delta}, {"log_prob", nullptr}, {"special", false}}}});
  }
  if (u.finished) {
    finished_ = true;
    finish_status_ = u.finish_status;
    error_ = u.error;
    json last = chunks.empty() ? json::object() : std::move(chunks.back());
    if (!chunks.empty()) chunks.pop_back();
    last["generated_text"] = generated_text();
    last["details"] = details_json(details_);
    if (finish_status_ == FinishStatus::Error) {
      last["error"] = error_.empty() ? std::string("generation failed") : error_;
    }
    chunks.push_back(std::move(last));
  }
  return chunks;
}

std::string GenerationState::generated_text() const {
  return return_full_text_ ? input_ + text_ : text_;
}

json GenerationState::details_json(bool with_tokens) const {
  json d{{"finish_reason", finish_status_name(finish_status_)},
         {"generated_tokens", generated_tokens_},
         {"inputs", input_},
         {"prompt_tokens", prompt_tokens_}};
  if (with_tokens) {
    json toks = json::array();
    for (const auto& t : tokens_) toks.push_back(token_json(t, t.text));
    d["tokens"] = std::move(toks);
  }
  return d;
}

json GenerationState::response() const {
  json r{{"generated_text", generated_text()}};
  if (details_) r["details"] = details_json(true);
  return r;
}

}  // namespace lmx::plugin
