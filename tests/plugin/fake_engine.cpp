// A fake lmx::Engine for testing the plugin shim and lmx-server without a model: generates
// " t0 t1 t2 ..." one token per 2 ms step, honours max_new_tokens, stop sequences, cancel,
// job_queue_size and max_tokens (prompt tokens = words). Prompts that contain FAIL_NOW fail
// before the first token; FAIL_LATER fails after two tokens; SLOW makes each step 50 ms.
// EMIT_TOOL_CALL generates a fixed Hermes-style tool call (kToolCall) and ECHO_PROMPT the prompt
// itself (what a chat template rendered), 8 bytes a token, then eos.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <sstream>
#include <string_view>
#include <thread>

#include "engine/api/engine.h"
#include "engine/api/process_group.h"
#include "properties/serving_config.h"

namespace lmx {

// lmx_engine's definition (generator.cpp) is not linked into the fake plugin.
const char* finish_reason_name(FinishReason s) {
  switch (s) {
    case FinishStatus::Length:
      return "length";
    case FinishStatus::EosToken:
      return "eos_token";
    case FinishStatus::StopSequence:
      return "stop_sequence";
    case FinishStatus::Cancelled:
      return "cancelled";
    case FinishStatus::Error:
      return "error";
  }
  return "error";
}

namespace {

constexpr std::string_view kToolCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

struct Job {
  uint64_t id = 0;
  EngineRequest req;
  UpdateCallback cb;
  int prompt_tokens = 0;
  int produced = 0;
  std::string text;     // all generated text
  size_t released = 0;  // bytes of text already sent
  bool cancelled = false;
};

class FakeEngine : public Engine {
 public:
  explicit FakeEngine(const properties::ServingConfig& cfg) : cfg_(cfg) {
    worker_ = std::thread([this] { loop(); });
  }
  ~FakeEngine() override { shutdown(); }

  uint64_t enqueue(EngineRequest request, UpdateCallback on_update) override {
    int words = 0;
    std::istringstream in(request.prompt);
    for (std::string w; in >> w;) ++words;
    if (request.params.max_new_tokens == 0)  // as many as fit, as the engine does
      request.params.max_new_tokens = std::max(1, cfg_.max_tokens - words);
    if (words + request.params.max_new_tokens > cfg_.max_tokens) {
      throw RequestError("parameters.max_new_tokens",
                         "prompt (" + std::to_string(words) + " tokens) + max_new_tokens (" +
                             std::to_string(request.params.max_new_tokens) +
                             ") exceeds max_tokens (" + std::to_string(cfg_.max_tokens) + ")");
    }
    std::lock_guard lock(mu_);
    if (stopping_) throw EngineUnavailableError("engine is shutting down");
    if (static_cast<int>(jobs_.size()) >= cfg_.job_queue_size) {
      throw QueueFullError("queue is full (job_queue_size " + std::to_string(cfg_.job_queue_size) +
                           ")");
    }
    uint64_t id = next_id_++;
    Job job;
    job.id = id;
    job.req = std::move(request);
    job.cb = std::move(on_update);
    job.prompt_tokens = words;
    jobs_.push_back(std::move(job));
    cv_.notify_all();
    return id;
  }

  bool cancel(uint64_t id) override {
    std::lock_guard lock(mu_);
    for (auto& j : jobs_) {
      if (j.id == id && !j.cancelled) return j.cancelled = true;
    }
    return false;
  }

  nlohmann::json stats() const override {
    std::lock_guard lock(mu_);
    return {{"state", stopping_ ? "shutting_down" : "ready"},
            {"architecture", "fake"},
            {"running", jobs_.size()},
            {"waiting", 0},
            {"requests_total", next_id_ - 1},
            {"tokens_generated", tokens_.load()}};
  }
  const Tokenizer& tokenizer() const override { throw Error("the fake engine has no tokenizer"); }
  const properties::ServingConfig& config() const override { return cfg_; }

  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      if (stopping_) {
        if (!worker_.joinable()) return;
      }
      stopping_ = true;
      cv_.notify_all();
    }
    if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty() && stopping_) return;
      bool slow = false;
      std::vector<std::pair<UpdateCallback, RequestUpdate>> out;
      for (auto it = jobs_.begin(); it != jobs_.end();) {
        Job& j = *it;
        RequestUpdate u;
        u.id = j.id;
        u.prompt_tokens = j.prompt_tokens;
        slow = slow || j.req.prompt.find("SLOW") != std::string::npos;
        if (j.cancelled) {
          u.finished = true;
          u.finish_status = FinishStatus::Cancelled;
        } else if (j.req.prompt.find("FAIL_NOW") != std::string::npos ||
                   (j.req.prompt.find("FAIL_LATER") != std::string::npos && j.produced == 2)) {
          u.finished = true;
          u.finish_status = FinishStatus::Error;
          u.error = "fake model failure";
        } else {
          std::string_view script;
          if (j.req.prompt.find("EMIT_TOOL_CALL") != std::string::npos) script = kToolCall;
          if (j.req.prompt.find("ECHO_PROMPT") != std::string::npos) script = j.req.prompt;
          const bool scripted = !script.empty();
          GeneratedToken t{100 + j.produced,
                           scripted ? std::string(script.substr(
                                          std::min(script.size(), size_t(j.produced) * 8), 8))
                                    : " t" + std::to_string(j.produced),
                           -0.5f, false, {}};
          ++j.produced;
          ++tokens_;
          j.text += t.text;
          u.tokens.push_back(t);
          size_t end = j.text.size();
          for (const auto& stop : j.req.params.stop_sequences) {
            if (auto pos = j.text.find(stop); pos != std::string::npos && pos < end) {
              end = pos;
              u.finished = true;
              u.finish_status = FinishStatus::StopSequence;
            }
          }
          if (!u.finished && scripted && size_t(j.produced) * 8 >= script.size()) {
            u.finished = true;
            u.finish_status = FinishStatus::EosToken;
          }
          if (!u.finished && j.produced >= j.req.params.max_new_tokens) {
            u.finished = true;
            u.finish_status = FinishStatus::Length;
          }
          if (!u.finished) {
            // Hold back a possible partial stop sequence at the end.
            for (const auto& stop : j.req.params.stop_sequences) {
              for (size_t k = std::min(stop.size() - 1, j.text.size()); k > 0; --k) {
                if (j.text.compare(j.text.size() - k, k, stop, 0, k) == 0) {
                  end = std::min(end, j.text.size() - k);
                  break;
                }
              }
            }
          }
          if (end > j.released) {
            u.text_delta = j.text.substr(j.released, end - j.released);
            j.released = end;
          }
        }
        u.generated_tokens = j.produced;
        out.emplace_back(j.cb, u);
        it = u.finished ? jobs_.erase(it) : std::next(it);
      }
      lock.unlock();
      for (auto& [cb, u] : out) cb(u);
      std::this_thread::sleep_for(std::chrono::milliseconds(slow ? 50 : 2));
      lock.lock();
    }
  }

  properties::ServingConfig cfg_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::list<Job> jobs_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::atomic<int64_t> tokens_{0};
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Engine> Engine::create(const properties::ServingConfig& config) {
  return std::make_unique<FakeEngine>(config);
}

// The fake engine has no tensor-parallel ranks: every process is alone.
ProcessGroupPlace process_group_place() { return {}; }

void run_follower(const properties::ServingConfig&) {
  throw Error("the fake engine has no tensor-parallel ranks to follow");
}

}  // namespace lmx
