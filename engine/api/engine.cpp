// Engine: the request queue, the worker thread that drives the Scheduler, and per-request
// detokenization with stop sequences.
#include "engine/api/engine.h"

#include <atomic>
#include <cstdint>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/api/replicated_engine.h"
#include "engine/api/serving_backend.h"
#include "engine/core/load_deadline.h"
#include "engine/core/log.h"
#include "engine/generate/top_logprobs.h"
#include "engine/model/model.h"
#include "engine/model/shard.h"
#include "engine/scheduler/scheduler.h"
#include "engine/serving/stop_sequences.h"
#include "engine/tokenizer/tokenizer.h"
#include "properties/serving_config.h"

namespace lmx {
namespace {

using Clock = std::chrono::steady_clock;
// make_backend's result in the process that serves: null only where this process turned out to be
// another rank of an mpirun group, which runs lmx::run_follower instead of an engine.
std::unique_ptr<Backend> leader_backend(std::unique_ptr<Backend> backend) {
  if (!backend)
    throw_error("this process ran as a follower rank of its mpirun group, not as process 0; only "
                "process 0 serves the model (the others run lmx::run_follower)");
  return backend;
}

struct ActiveRequest {
  std::shared_ptr<const UpdateCallback> on_update;  // shared with queued deliveries
  StreamDecoder decoder;
  StopSequenceMatcher stops;
  int prompt_tokens = 0;
  int generated = 0;
};

struct Pending {
  uint64_t id;
  SchedulerRequest request;
  std::vector<std::string> stop_sequences;
  UpdateCallback on_update;
  Clock::time_point arrived;  // dynamic batching waits max_batch_delay from the oldest
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(const properties::ServingConfig& config, int replica)
      : config_(config),
        model_(load_for_serving(config)),
        tokenizer_(Tokenizer::from_model_dir(config.model_path)),
        backend_(leader_backend(make_backend(config, model_, replica))),
        kv_cache_dtype_(backend_->kv_cache_dtype_name()),
        scheduler_(*backend_, scheduler_limits(config)),
        started_(Clock::now()) {
    // option.model_loading_timeout: a load abandoned by Engine::create stops here at the latest
    // (before any thread starts), whatever it could not be interrupted in.
    check_load_deadline();
    lmx::logger().info("engine ready: {} on {} ({}), {}; KV cache {}", model_.desc.architecture,
                       backend_->name(), path().name, path().reason, kv_cache_dtype_);
    delivery_ = std::thread([this] { run_deliveries(); });
    worker_ = std::thread([this] { run(); });
  }

  ~EngineImpl() override { shutdown(); }

  uint64_t enqueue(EngineRequest request, UpdateCallback on_update) override {
    if (!on_update) throw RequestError("callback", "a request needs an update callback");
    SchedulerRequest sr;
    if (request.prompt_ids) {
      sr.prompt = std::move(*request.prompt_ids);
    } else {
      sr.prompt = tokenizer_.encode(request.prompt, request.add_special_tokens);
    }
    if (sr.prompt.empty()) throw RequestError("inputs", "the prompt is empty");
    RequestParams& p = request.params;
    // 0 (a chat request without max_tokens): whatever room is left after the prompt, as OpenAI
    // servers do; the room is bounded by max_tokens, the model's positions and the KV cache.
    if (p.max_new_tokens == 0) {
      const KvCacheShape& kv = backend_->kv_shape();
      const long room = std::min({long(config_.max_tokens),
                                  long(backend_->desc().max_position_embeddings),
                                  long(kv.num_blocks) * kv.block_size});
      p.max_new_tokens = int(std::max(1L, room - long(sr.prompt.size())));
    }
    const long total = long(sr.prompt.size()) + p.max_new_tokens;
    if (total > config_.max_tokens)
      throw RequestError("parameters.max_new_tokens",
                         fmt::format("prompt ({} tokens) + max_new_tokens ({}) = {} exceeds "
                                     "max_tokens ({})", sr.prompt.size(), p.max_new_tokens, total,
                                     config_.max_tokens));
    sr.params.max_new_tokens = p.max_new_tokens;
    sr.params.sampling = p.sampling;
    sr.params.ignore_eos = p.ignore_eos;
    if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs)
      throw RequestError("parameters.top_n_tokens",
                         fmt::format("must be from 0 to {}, got {}", kMaxTopLogprobs, p.top_logprobs));
    sr.params.top_logprobs = p.top_logprobs;
    if (p.constraint)
      sr.params.constraint = std::make_shared<JsonTokenConstraint>(p.constraint, vocab_trie());
    scheduler_.validate(sr);  // immutable checks only: safe from any thread

    std::lock_guard lock(mutex_);
    if (stopping_) throw EngineUnavailableError("the engine is shutting down");
    if (int(incoming_.size()) + waiting_snapshot_ >= config_.job_queue_size)
      throw QueueFullError(fmt::format("the request queue is full ({} waiting, job_queue_size {})",
                                       incoming_.size() + size_t(waiting_snapshot_),
                                       config_.job_queue_size));
    const uint64_t id = next_id_++;
    sr.id = id;
    incoming_.push_back({id, std::move(sr), p.stop_sequences, std::move(on_update), Clock::now()});
    live_.insert(id);
    if (config_.request_timeout_s > 0) {
      const auto deadline = Clock::now() + std::chrono::seconds(config_.request_timeout_s);
      deadlines_.emplace(deadline, id);
      deadline_of_.emplace(id, deadline);
    }
    ++requests_total_;
    wake_.notify_one();
    return id;
  }

  bool cancel(uint64_t id) override {
    std::lock_guard lock(mutex_);
    if (!live_.count(id)) return false;
    cancels_.insert(id);
    wake_.notify_one();
    return true;
  }

  nlohmann::json stats() const override {
    std::lock_guard lock(mutex_);
    const double uptime = std::chrono::duration<double>(Clock::now() - started_).count();
    return {{"state", stopping_ ? "draining" : "ready"},
            {"architecture", model_.desc.architecture},
            {"device", backend_->name()},
            {"path", path().name},
            {"path_reason", path().reason},
            {"tensor_parallel", shard_plan(model_.desc, backend_->tensor_parallel_degree())},
            {"running", stats_.running},
            {"waiting", stats_.waiting + int(incoming_.size())},
            {"kv_blocks_used", stats_.kv_blocks_used},
            {"kv_blocks_free", stats_.kv_blocks_free},
            {"kv_block_size", backend_->kv_shape().block_size},
            {"kv_cache_dtype", kv_cache_dtype_},
            {"quantization", model_.quantization},
            {"preemptions", stats_.preemptions},
            {"requests_total", requests_total_},
            {"timed_out_total", timed_out_total_},
            {"tokens_generated", tokens_generated_},
            {"non_finite_logits_total", non_finite_logits_total_.load()},
            {"tokens_per_second", recent_tokens_per_second()},
            {"uptime_seconds", uptime},
            {"max_tokens", config_.max_tokens},
            {"max_rolling_batch_size", config_.max_rolling_batch_size}};
  }

  const Tokenizer& tokenizer() const override { return tokenizer_; }
  const properties::ServingConfig& config() const override { return config_; }

  // The vocabulary trie of constrained decoding, built by the first request that needs it.
  std::shared_ptr<const TokenTrie> vocab_trie() {
    std::call_once(vocab_trie_once_, [this] {
      const auto start = Clock::now();
      vocab_trie_ = std::make_shared<const TokenTrie>(TokenTrie::of(tokenizer_));
      lmx::logger().info("constrained decoding: vocabulary trie of {} nodes built in {:.0f} ms",
                         vocab_trie_->nodes(),
                         std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    });
    return vocab_trie_;
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      wake_.notify_one();
    }
    if (worker_.joinable()) worker_.join();
    {
      std::lock_guard lock(delivery_mutex_);
      delivery_stop_ = true;
      delivery_wake_.notify_one();
    }
    if (delivery_.joinable()) delivery_.join();  // after every queued update was delivered
  }

 private:
  ExecutionPath path() const { return execution_path(*model_.architecture, backend_->name() == "cpu"); }

  double recent_tokens_per_second() const {  // over the last 10 s; mutex_ held
    const auto cutoff = Clock::now() - std::chrono::seconds(10);
    long tokens = 0;
    for (const auto& [t, n] : recent_steps_)
      if (t >= cutoff) tokens += n;
    return tokens / 10.0;
  }

  void finish(uint64_t id, FinishReason why, const std::string& error = {}) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    ActiveRequest& a = it->second;
    RequestUpdate u;
    u.id = id;
    if (why != FinishReason::Cancelled && why != FinishReason::Error && why != FinishReason::StopSequence)
      u.text_delta = a.stops.push(a.decoder.finish()) + a.stops.flush();
    u.finished = true;
    u.finish_status = why;
    u.error = error;
    u.prompt_tokens = a.prompt_tokens;
    u.generated_tokens = a.generated;
    forget(id);  // before the final update: cancel() answers false once the caller has it
    deliver(a, std::move(u));
    active_.erase(it);
  }

  void forget(uint64_t id) {
    std::lock_guard lock(mutex_);
    live_.erase(id);
    drop_deadline(id);
  }

  // option.request_timeout: the deadlines of live requests, earliest first. mutex_ held.
  void drop_deadline(uint64_t id) {
    auto it = deadline_of_.find(id);
    if (it == deadline_of_.end()) return;
    deadlines_.erase({it->second, id});
    deadline_of_.erase(it);
  }

  std::optional<Clock::time_point> next_deadline() const {  // mutex_ held
    if (deadlines_.empty()) return {};
    return deadlines_.begin()->first;
  }

  bool deadline_passed() const {  // mutex_ held
    return !deadlines_.empty() && deadlines_.begin()->first <= Clock::now();
  }

  // The requests past their deadline, taken out of the deadline set. mutex_ held.
  std::unordered_set<uint64_t> take_expired() {
    std::unordered_set<uint64_t> expired;
    const auto now = Clock::now();
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      const uint64_t id = deadlines_.begin()->second;
      deadlines_.erase(deadlines_.begin());
      deadline_of_.erase(id);
      expired.insert(id);
    }
    return expired;
  }

  std::string timeout_message(uint64_t id) const {
    auto it = active_.find(id);
    const int generated = it == active_.end() ? 0 : it->second.generated;
    return fmt::format(
        "the request timed out: it ran past option.request_timeout={} s (from its arrival, "
        "waiting included) after {} generated tokens; it was stopped and its KV cache blocks "
        "freed",
        config_.request_timeout_s, generated);
  }

  // Updates go to the delivery thread, which runs the callbacks in order while the worker
  // already computes the next step (a host formatting each token, as the plugin does, then
  // costs no decode time).
  void deliver(const ActiveRequest& a, RequestUpdate u) {
    std::lock_guard lock(delivery_mutex_);
    deliveries_.push_back({a.on_update, std::move(u)});
    delivery_wake_.notify_one();
  }

  void run_deliveries() {
    std::deque<Delivery> batch;
    for (;;) {
      {
        std::unique_lock lock(delivery_mutex_);
        delivery_wake_.wait(lock, [&] { return delivery_stop_ || !deliveries_.empty(); });
        if (deliveries_.empty()) return;  // stopping and flushed
        batch.swap(deliveries_);
      }
      for (Delivery& d : batch) {
        try {
          (*d.callback)(d.update);
        } catch (const std::exception& e) {
          lmx::logger().error("update callback of request {} threw: {}", d.update.id, e.what());
        } catch (...) {
          lmx::logger().error("update callback of request {} threw", d.update.id);
        }
      }
      batch.clear();
    }
  }


  // Moves new requests into the scheduler and applies cancellations; false when the worker is
  // done (stopping and nothing left).
  // Rolling batch: every request joins the running batch at once. option.rolling_batch=disable
  // (LMI's dynamic batching): requests gather into batches of up to batch_size, waiting at most
  // max_batch_delay ms from the oldest; a batch runs to its end before the next one starts.
  bool dynamic_batching() const { return config_.rolling_batch == properties::RollingBatch::Disable; }

  static SchedulerLimits scheduler_limits(const properties::ServingConfig& c) {
    return {int(concurrent_sequences(c)), c.max_rolling_batch_prefill_tokens};
  }

  // Under dynamic batching: whether the held requests go now (the batch is full, the oldest has
  // waited max_batch_delay, or the engine is stopping), else when they will. Caller holds mutex_.
  std::optional<Clock::time_point> batch_deadline() const {
    if (incoming_.empty() || stopping_ || int(incoming_.size()) >= config_.batch_size) return {};
    return incoming_.front().arrived + std::chrono::milliseconds(config_.max_batch_delay_ms);
  }

  bool take_work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      const bool running = scheduler_.has_work();
      if (stopping_ || !cancels_.empty() || running || deadline_passed()) break;
      std::optional<Clock::time_point> wake_at = next_deadline();
      if (!incoming_.empty()) {
        if (!dynamic_batching()) break;
        const auto deadline = batch_deadline();
        if (!deadline || Clock::now() >= *deadline) break;
        if (!wake_at || *deadline < *wake_at) wake_at = deadline;
      }
      if (wake_at) {
        wake_.wait_until(lock, *wake_at);
      } else {
        wake_.wait(lock);
      }
    }
    std::deque<Pending> incoming;
    if (!dynamic_batching()) {
      incoming.swap(incoming_);
    } else if (!scheduler_.has_work()) {  // the next batch: up to batch_size of the oldest
      while (!incoming_.empty() && int(incoming.size()) < config_.batch_size) {
        incoming.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
    }
    std::unordered_set<uint64_t> cancels;
    cancels.swap(cancels_);
    const std::unordered_set<uint64_t> expired = take_expired();
    std::deque<Pending> held_cancelled;  // cancelled or expired while waiting for their batch
    for (auto it = incoming_.begin(); it != incoming_.end();) {
      if (cancels.count(it->id) || expired.count(it->id)) {
        held_cancelled.push_back(std::move(*it));
        it = incoming_.erase(it);
      } else {
        ++it;
      }
    }
    const bool stopping = stopping_;
    lock.unlock();

    for (Pending& p : incoming) {
      activate(p);
      try {
        scheduler_.add(std::move(p.request));
      } catch (const std::exception& e) {
        finish(p.id, FinishReason::Error, e.what());
      }
    }
    for (Pending& p : held_cancelled) activate(p);
    // Cancelled and expired requests leave the scheduler (their KV blocks freed) and the counters
    // are refreshed before any of their final updates goes out: whoever has one sees them gone.
    std::vector<std::pair<uint64_t, std::string>> timed_out;  // (id, why)
    for (uint64_t id : cancels) scheduler_.remove(id);
    for (uint64_t id : expired) {
      if (!active_.count(id) || cancels.count(id)) continue;  // finished or cancelled meanwhile
      scheduler_.remove(id);
      timed_out.emplace_back(id, timeout_message(id));
    }
    if (!cancels.empty() || !timed_out.empty()) {
      {
        std::lock_guard relock(mutex_);
        timed_out_total_ += long(timed_out.size());
      }
      refresh_stats();
    }
    for (uint64_t id : cancels) finish(id, FinishReason::Cancelled);
    for (const auto& [id, why] : timed_out) {
      lmx::logger().info("request {}: {}", id, why);
      finish(id, FinishReason::Error, why);
    }
    return !(stopping && !scheduler_.has_work() && incoming_empty());
  }

  bool incoming_empty() {
    std::lock_guard lock(mutex_);
    return incoming_.empty();
  }

  // The request's delivery state, from the moment it leaves the incoming queue.
  void activate(Pending& p) {
    const int prompt_tokens = int(p.request.prompt.size());
    active_.emplace(p.id, ActiveRequest{std::make_shared<const UpdateCallback>(std::move(p.on_update)),
                                        StreamDecoder(tokenizer_, true),
                                        StopSequenceMatcher(std::move(p.stop_sequences)),
                                        prompt_tokens, 0});
  }

  void emit(const TokenOutput& out) {
    if (out.finished && out.reason == FinishReason::Error) {  // this request alone failed
      lmx::logger().warn("request {}: {}", out.id, out.error);
      non_finite_logits_total_.fetch_add(1);
      finish(out.id, FinishReason::Error, out.error);
      return;
    }
    auto it = active_.find(out.id);
    if (it == active_.end()) return;
    ActiveRequest& a = it->second;
    ++a.generated;
    RequestUpdate u;
    u.id = out.id;
    GeneratedToken t;
    t.id = out.token.id;
    t.logprob = out.token.logprob;
    t.special = tokenizer_.is_special(out.token.id);
    t.text = a.decoder.push(out.token.id);
    for (const SampledToken& alt : out.top) {
      const int32_t id = alt.id;
      t.top.push_back({id, tokenizer_.decode(std::span<const int32_t>(&id, 1)), alt.logprob,
                       tokenizer_.is_special(id)});
    }
    u.text_delta = a.stops.push(t.text);
    u.tokens.push_back(std::move(t));
    u.prompt_tokens = a.prompt_tokens;
    u.generated_tokens = a.generated;
    if (a.stops.stopped()) {  // text-level stop: end it here
      scheduler_.remove(out.id);
      u.finished = true;
      u.finish_status = FinishReason::StopSequence;
    } else if (out.finished) {
      u.text_delta += a.stops.push(a.decoder.finish()) + a.stops.flush();
      u.finished = true;
      u.finish_status = out.reason;
    }
    const bool finished = u.finished;
    if (finished) forget(out.id);
    deliver(a, std::move(u));
    if (finished) active_.erase(it);
  }

  // At debug level, one line per step: what it fed the model, how long the step took (scheduling,
  // forward, sampling, ids back) and the time before it since the previous step ended (emitting
  // updates, taking new requests).
  void trace_step(Clock::time_point start, Clock::time_point end) {
    if (!lmx::logger().should_log(spdlog::level::debug)) return;
    const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    const StepComposition c = scheduler_.last_step();
    lmx::logger().debug(
        "step: {} decode + {} prompt tokens, {:.3f} ms, {:.3f} ms since the last step",
        c.decode_tokens, c.prompt_tokens, ms(end - start),
        last_step_end_ ? ms(start - *last_step_end_) : 0.0);
    last_step_end_ = end;
  }

  // The counters /metrics and stats() report, as the scheduler holds them now.
  void refresh_stats() {
    std::lock_guard lock(mutex_);
    stats_ = scheduler_.stats();
    waiting_snapshot_ = stats_.waiting;
  }

  void run() {
    while (take_work()) {
      if (!scheduler_.has_work()) {  // nothing to step (cancellations, refused requests)
        refresh_stats();
        continue;
      }
      std::vector<TokenOutput> outputs;
      const auto step_start = Clock::now();
      try {
        outputs = scheduler_.step();
      } catch (const std::exception& e) {  // fail what was running, keep serving
        lmx::logger().error("engine step failed: {}", e.what());
        std::vector<uint64_t> ids;
        for (const auto& [id, a] : active_) ids.push_back(id);
        for (uint64_t id : ids) {
          scheduler_.remove(id);
          finish(id, FinishReason::Error, e.what());
        }
      }
      const auto step_end = Clock::now();
      // The counters as the step left them (finished sequences' blocks freed) before any final
      // update goes out: a client that has its answer never sees its blocks in use.
      refresh_stats();
      for (const TokenOutput& out : outputs) emit(out);
      trace_step(step_start, step_end);
      std::lock_guard lock(mutex_);
      stats_ = scheduler_.stats();
      waiting_snapshot_ = stats_.waiting;
      tokens_generated_ += long(outputs.size());
      recent_steps_.emplace_back(Clock::now(), long(outputs.size()));
      while (recent_steps_.size() > 1 && recent_steps_.front().first < Clock::now() - std::chrono::seconds(10))
        recent_steps_.pop_front();
    }
  }

  properties::ServingConfig config_;
  LoadedModel model_;
  Tokenizer tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::string kv_cache_dtype_;  // stats(): fp8_e4m3 or the compute dtype
  std::once_flag vocab_trie_once_;
  std::shared_ptr<const TokenTrie> vocab_trie_;
  Scheduler scheduler_;  // worker thread only (validate() is immutable and used by callers)
  std::unordered_map<uint64_t, ActiveRequest> active_;  // worker thread only
  std::thread worker_;

  struct Delivery {
    std::shared_ptr<const UpdateCallback> callback;
    RequestUpdate update;
  };
  std::mutex delivery_mutex_;  // guards deliveries_ and delivery_stop_
  std::condition_variable delivery_wake_;
  std::deque<Delivery> deliveries_;
  bool delivery_stop_ = false;
  std::thread delivery_;
  Clock::time_point started_;

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  std::deque<Pending> incoming_;
  std::unordered_set<uint64_t> cancels_;
  std::unordered_set<uint64_t> live_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  int waiting_snapshot_ = 0;
  SchedulerStats stats_;
  long requests_total_ = 0;
  long timed_out_total_ = 0;  // requests ended by option.request_timeout
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;  // option.request_timeout
  std::unordered_map<uint64_t, Clock::time_point> deadline_of_;
  long tokens_generated_ = 0;
  std::atomic<long> non_finite_logits_total_{0};  // requests failed by non-finite logits
  std::deque<std::pair<Clock::time_point, long>> recent_steps_;
  std::optional<Clock::time_point> last_step_end_;  // trace_step, worker thread only
};

// The replicas of option.max_replicas load side by side (each on its own GPUs); the first
// failure is the set's. Runs under the load's deadline (replica threads take it too).
std::unique_ptr<Engine> create_now(const properties::ServingConfig& config) {
  check_process_group_settings(config);
  if (config.max_replicas <= 1) return std::make_unique<EngineImpl>(config, 0);
  std::vector<std::future<std::unique_ptr<Engine>>> loading;
  for (int r = 0; r < config.max_replicas; ++r)
    loading.push_back(std::async(std::launch::async,
                                 [&config, r, deadline = current_load_deadline()]
                                 () -> std::unique_ptr<Engine> {
                                   LoadDeadlineScope scope(deadline);
                                   return std::make_unique<EngineImpl>(config, r);
                                 }));
  std::vector<std::unique_ptr<Engine>> replicas;
  std::exception_ptr error;
  for (auto& f : loading) {
    try {
      replicas.push_back(f.get());
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  lmx::logger().info("{} replicas of the model, each on tensor_parallel_degree {}", replicas.size(),
                     config.tensor_parallel_degree);
  return make_replicated_engine(std::move(replicas));
}

}  // namespace

// option.model_loading_timeout: a load that runs past it fails at the deadline with an error
// naming the setting, instead of hanging or serving late (engine/core/load_deadline.h).
std::unique_ptr<Engine> Engine::create(const properties::ServingConfig& config) {
  const std::string key = "option.model_loading_timeout";
  const int timeout_s = config.model_loading_timeout_s;
  const auto source = config.sources.find(key);
  const std::string from =
      source == config.sources.end() || source->second.kind == properties::ValueSource::Kind::Default
          ? "the default"
          : "from " + source->second.describe();
  auto deadline = std::make_shared<LoadDeadline>(
      Clock::now() + std::chrono::seconds(timeout_s),
      fmt::format("the model in {} did not load within {}={} s ({}); the load was abandoned "
                  "(raise {} for a model that needs longer)",
                  config.model_path.string(), key, timeout_s, from, key));
  return run_with_load_deadline<Engine>(deadline, [config] { return create_now(config); });
}

}  // namespace lmx
