#include "engine/generate/generator.h"

#include "engine/core/error.h"

namespace lmx {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Length: return "length";
    case FinishReason::EosToken: return "eos_token";
    case FinishReason::StopSequence: return "stop_sequence";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "error";
}

std::vector<GenerationResult> Generator::generate(std::span<const GenerationRequest> requests) {
  Scheduler scheduler(backend_, limits_);
  for (size_t i = 0; i < requests.size(); ++i) {
    try {
      scheduler.validate({i, requests[i].prompt, requests[i].params});
    } catch (const RequestError& e) {
      throw RequestError(e.field(), fmt::format("request {}: {}", i, e.what()));
    }
  }
  for (size_t i = 0; i < requests.size(); ++i)
    scheduler.add({i, requests[i].prompt, requests[i].params});

  std::vector<GenerationResult> results(requests.size());
  while (scheduler.has_work()) {
    for (TokenOutput& out : scheduler.step()) {
      GenerationResult& r = results[out.id];
      if (!out.prompt_logits.empty()) r.prompt_logits = std::move(out.prompt_logits);
      if (!out.step_logits.empty()) r.step_logits.push_back(std::move(out.step_logits));
      r.tokens.push_back(out.token.id);
      r.logprobs.push_back(out.token.logprob);
      if (out.finished) r.finish = out.reason;
    }
  }
  return results;
}

}  // namespace lmx
