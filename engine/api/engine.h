// The engine API: a request queue in front of the scheduler. The plugin ABI and the server use
// only this (plus the tokenizer for counting). Thread-safe: any thread may enqueue or cancel.
//
//   auto engine = lmx::Engine::create(serving_config);
//   uint64_t id = engine->enqueue({.prompt = "Once upon a time", .params = {...}},
//                                 [](const lmx::RequestUpdate& u) { ... });
//   engine->cancel(id);
//
// Updates for one request arrive in order on the engine's delivery thread (one thread for all
// requests, beside the worker that runs the model); a callback must not block (hand the update
// to your own queue): a slow callback delays every request's updates, not the model. The last
// update has finished == true, always, also after cancel(), an error or shutdown(): nothing is
// lost silently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/generate/finish_reason.h"
#include "engine/generate/json_recognizer.h"
#include "engine/generate/sampling.h"

namespace lmx {

namespace properties {
struct ServingConfig;
}
class Tokenizer;

// RequestError (bad input, HTTP 400, names the field) is in engine/core/error.h.

// The waiting queue holds job_queue_size requests already (HTTP 503).
class QueueFullError : public Error {
 public:
  using Error::Error;
};

// The engine is shutting down or failed to start (HTTP 503 / 424).
class EngineUnavailableError : public Error {
 public:
  using Error::Error;
};

struct RequestParams {
  int max_new_tokens = 30;  // 0: as many as max_tokens leaves after the prompt
  SamplingParams sampling;                 // greedy unless do_sample
  std::vector<std::string> stop_sequences;  // text; the stop text itself is not returned
  bool ignore_eos = false;
  int top_logprobs = 0;  // each token also comes with its draw's k most likely tokens (0..20)
  // Constrained decoding (tool_choice "required" / a named function): the generated text is
  // exactly this grammar's (prefix, one JSON value per its schema, suffix), and the request
  // finishes with StopSequence once it is whole (or Length first). The engine builds its
  // vocabulary trie on the first such request (engine/generate/token_trie.h).
  std::shared_ptr<const JsonGrammar> constraint;
};

struct EngineRequest {
  std::string prompt;                             // tokenized by the engine...
  std::optional<std::vector<int32_t>> prompt_ids;  // ...unless ids are given
  // False for a rendered chat template, which already holds BOS etc. (transformers'
  // apply_chat_template(tokenize=True) tokenizes with add_special_tokens=False).
  bool add_special_tokens = true;
  RequestParams params;
};

using FinishStatus = FinishReason;
inline const char* finish_status_name(FinishStatus s) { return finish_reason_name(s); }

// One of the most likely tokens of a draw (RequestParams::top_logprobs).
struct TopToken {
  int32_t id = 0;
  std::string text;  // the token alone, decoded (special tokens as their text)
  float logprob = 0.0f;
  bool special = false;
};

struct GeneratedToken {
  int32_t id = 0;
  std::string text;  // this token's own decoded text (may be "" inside a UTF-8 sequence)
  float logprob = 0.0f;
  bool special = false;
  std::vector<TopToken> top;  // most likely first, when RequestParams::top_logprobs > 0
};

struct RequestUpdate {
  uint64_t id = 0;
  std::vector<GeneratedToken> tokens;  // new since the previous update
  std::string text_delta;              // new complete text; stop sequences never appear in part
  bool finished = false;
  FinishStatus finish_status = FinishStatus::Length;
  std::string error;  // when finish_status == Error
  int prompt_tokens = 0;
  int generated_tokens = 0;  // total so far
};

using UpdateCallback = std::function<void(const RequestUpdate&)>;

class Engine {
 public:
  // Loads the model named by the configuration and starts the worker. Throws lmx::Error when the
  // model or the configuration cannot be served, and LoadTimeoutError (an lmx::Error) as soon as
  // the load runs past option.model_loading_timeout (engine/core/load_deadline.h).
  static std::unique_ptr<Engine> create(const properties::ServingConfig& config);
  virtual ~Engine() = default;

  // Validates (RequestError), checks prompt + max_new_tokens against max_tokens (RequestError
  // naming both numbers), queues (QueueFullError when full). Returns the request id.
  virtual uint64_t enqueue(EngineRequest request, UpdateCallback on_update) = 0;
  // Frees the request's resources within one step; its final update says Cancelled. False when
  // the id is unknown or already finished.
  virtual bool cancel(uint64_t id) = 0;

  // {"state", "architecture", "path" (fused|generic), "path_reason", "device", "running",
  //  "waiting", "kv_blocks_used", "kv_blocks_free", "kv_block_size", "kv_cache_dtype" (fp8_e4m3
  //  or the compute dtype: fp32, fp16, bf16), "quantization" (null, or what it did: the method;
  //  smoothquant's alphas per layer and calibration), "requests_total", "tokens_generated",
  //  "tokens_per_second", ...}
  virtual nlohmann::json stats() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  virtual const properties::ServingConfig& config() const = 0;

  // Stops admitting, finishes every queued and running request, joins the worker. Idempotent.
  virtual void shutdown() = 0;
};

}  // namespace lmx
