#include "plugin/stream_delivery.h"

#include <chrono>
#include <system_error>
#include <utility>

#include "engine/api/engine.h"
#include "engine/core/log.h"

namespace lmx::plugin {
namespace {

constexpr auto kIdleExit = std::chrono::seconds(10);
thread_local bool t_in_stream_callback = false;

constexpr const char* kNoFinalChunk =
    R"({"generated_text":"","details":{"finish_reason":"error"},"error":"internal error: the final chunk was lost"})";

}  // namespace

bool in_stream_callback() { return t_in_stream_callback; }

StreamDelivery::StreamDelivery(int64_t max_buffer_bytes) : max_buffer_bytes_(max_buffer_bytes) {}

StreamDelivery::~StreamDelivery() { stop(); }

std::shared_ptr<StreamDelivery::Stream> StreamDelivery::open(lmx_stream_callback callback,
                                                             void* user_data) {
  std::lock_guard lock(mu_);
  if (stopping_) throw EngineUnavailableError("the handle is being destroyed");
  ++open_;
  return std::make_shared<Stream>(*this, callback, user_data);
}

void StreamDelivery::abandon(Stream& s) {
  std::lock_guard lock(mu_);
  if (s.done_) return;
  s.done_ = true;
  --open_;
  done_cv_.notify_all();
}

bool StreamDelivery::Stream::over_bound() const {
  std::lock_guard lock(owner_.mu_);
  return over_bound_;
}

StreamDelivery::Push StreamDelivery::push(Stream& s, std::vector<std::string> chunks, bool final) {
  std::lock_guard lock(mu_);
  if (s.final_queued_ || s.done_) return Push::Dropped;
  Push result = Push::Queued;
  if (final && chunks.empty()) chunks.emplace_back(kNoFinalChunk);
  if (s.over_bound_) {
    if (!final) return Push::Dropped;
    chunks.erase(chunks.begin(), chunks.end() - 1);  // the final chunk only
    result = Push::Dropped;
  } else if (!final) {
    int64_t add = 0;
    for (const auto& c : chunks) add += int64_t(c.size());
    if (!s.chunks_.empty() && s.bytes_ + add > max_buffer_bytes_) {
      s.over_bound_ = true;
      ++cancelled_;
      return Push::Overflowed;
    }
  }
  for (auto& c : chunks) {
    s.bytes_ += int64_t(c.size());
    buffered_ += int64_t(c.size());
    s.chunks_.push_back(std::move(c));
  }
  if (final) s.final_queued_ = true;
  if (!s.chunks_.empty()) schedule(s);
  return result;
}

void StreamDelivery::schedule(Stream& s) {
  if (s.scheduled_) return;  // the thread serving it will see the new chunks
  s.scheduled_ = true;
  ready_.push_back(s.shared_from_this());
  // Every ready stream needs a thread that is not inside a callback.
  if (int64_t(ready_.size()) > idle_) {
    spawn();
  } else {
    wake_.notify_one();
  }
}

void StreamDelivery::spawn() {
  for (std::thread::id id : exited_) {  // they hold no lock any more: joining is quick
    for (auto it = threads_.begin(); it != threads_.end(); ++it) {
      if (it->get_id() == id) {
        it->join();
        threads_.erase(it);
        break;
      }
    }
  }
  exited_.clear();
  try {
    threads_.emplace_back([this] { worker(); });
    ++running_;
  } catch (const std::system_error& e) {
    // No thread now: the chunks wait for a running one (stop() delivers them itself if none is).
    lmx::logger().warn("stream delivery: could not start a thread ({}); chunks wait", e.what());
    wake_.notify_one();
    done_cv_.notify_all();
  }
}

void StreamDelivery::worker() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (ready_.empty()) {
      if (exit_) break;
      ++idle_;
      const bool work = wake_.wait_for(lock, kIdleExit, [&] { return exit_ || !ready_.empty(); });
      --idle_;
      if (!work) break;  // idle for kIdleExit: another thread is started when needed
      continue;
    }
    serve(lock);
  }
  exited_.push_back(std::this_thread::get_id());
  --running_;
  done_cv_.notify_all();
}

void StreamDelivery::serve(std::unique_lock<std::mutex>& lock) {
  std::shared_ptr<Stream> s = std::move(ready_.front());
  ready_.pop_front();
  while (!s->chunks_.empty()) {
    std::string chunk = std::move(s->chunks_.front());
    s->chunks_.pop_front();
    s->bytes_ -= int64_t(chunk.size());
    buffered_ -= int64_t(chunk.size());
    const bool final = s->final_queued_ && s->chunks_.empty();
    lock.unlock();
    t_in_stream_callback = true;
    try {
      s->callback_(s->user_data_, chunk.c_str(), chunk.size(), final ? 1 : 0);
    } catch (...) {  // a C++ host's callback that throws: the chunk is lost, the thread is not
    }
    t_in_stream_callback = false;
    lock.lock();
    if (final) {
      s->done_ = true;
      --open_;
      done_cv_.notify_all();
      return;
    }
  }
  s->scheduled_ = false;
}

void StreamDelivery::stop() {
  std::unique_lock lock(mu_);
  stopping_ = true;
  while (open_ > 0) {
    if (!ready_.empty() && running_ == 0) {  // no thread could be started: deliver here
      serve(lock);
      continue;
    }
    done_cv_.wait(lock);
  }
  exit_ = true;
  wake_.notify_all();
  std::list<std::thread> threads = std::move(threads_);
  threads_.clear();
  exited_.clear();
  lock.unlock();
  for (auto& t : threads) t.join();
}

nlohmann::json StreamDelivery::stats() const {
  std::lock_guard lock(mu_);
  return {{"open_streams", open_},
          {"delivery_threads", running_},
          {"buffered_bytes", buffered_},
          {"slow_consumers_cancelled", cancelled_},
          {"max_stream_buffer_bytes", max_buffer_bytes_}};
}

}  // namespace lmx::plugin
