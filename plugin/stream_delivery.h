// Where host stream callbacks run: on the plugin's delivery threads, never on an engine thread
// (the engine's update callbacks only format chunks and queue them here).
//
// Each streaming request has its own queue of chunks (a Stream). A delivery thread takes one
// request's queue at a time and calls that request's callback for each chunk in order, so a
// callback that is slow (a GIL, a lock, a slow socket) holds back only its own request:
//   - a thread is started whenever more requests have chunks waiting than threads are idle, so
//     threads <= requests with chunks waiting + idle threads; an idle thread ends after 10 s;
//   - one thread at a time serves a request: its chunks arrive in order, its callback is never
//     called twice at once.
//
// A request's queue is bounded: when its waiting chunks would exceed `max_buffer_bytes` bytes
// of JSON (option.max_stream_buffer_bytes; one chunk is always accepted into an empty queue),
// push() answers Overflowed once (the caller cancels the request in the engine), the request's
// later chunks are dropped, and its final chunk is still delivered (the caller says why in it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugin/include/lmx/plugin.h"

namespace lmx::plugin {

class StreamDelivery {
 public:
  class Stream;
  enum class Push { Queued, Dropped, Overflowed };

  explicit StreamDelivery(int64_t max_buffer_bytes);
  ~StreamDelivery();  // stop()
  StreamDelivery(const StreamDelivery&) = delete;
  StreamDelivery& operator=(const StreamDelivery&) = delete;

  // A queue for a new request; its chunks go to callback(user_data, ...). Throws
  // EngineUnavailableError once stop() has begun.
  std::shared_ptr<Stream> open(lmx_stream_callback callback, void* user_data);
  // Forgets a stream that never received a chunk (its request was refused): no callback is made.
  void abandon(Stream& stream);

  // Refuses open() from now on, waits until every open stream has delivered its final chunk (the
  // engine must deliver them: shut it down first), then joins the threads. Must not be called
  // from a stream callback. Idempotent.
  void stop();

  // {"open_streams", "delivery_threads", "buffered_bytes", "slow_consumers_cancelled",
  //  "max_stream_buffer_bytes"}
  nlohmann::json stats() const;

  int64_t max_buffer_bytes() const { return max_buffer_bytes_; }

 private:
  Push push(Stream& s, std::vector<std::string> chunks, bool final);
  void schedule(Stream& s);  // mu_ held
  void spawn();              // mu_ held
  void worker();
  void serve(std::unique_lock<std::mutex>& lock);  // delivers ready_.front(); mu_ held

  const int64_t max_buffer_bytes_;
  mutable std::mutex mu_;            // guards everything below and every Stream's queue
  std::condition_variable wake_;     // workers: ready_ or exit_ changed
  std::condition_variable done_cv_;  // stop(): a stream finished, or nobody can serve ready_
  std::deque<std::shared_ptr<Stream>> ready_;  // streams with chunks and no thread on them
  std::list<std::thread> threads_;
  std::vector<std::thread::id> exited_;  // ended threads, joined by the next spawn() or stop()
  int running_ = 0;                      // threads not yet ended
  int idle_ = 0;                         // threads waiting for ready_
  int64_t open_ = 0;
  int64_t buffered_ = 0;
  int64_t cancelled_ = 0;
  bool stopping_ = false;
  bool exit_ = false;
};

// One request's queue. The engine's update callback of that request calls push(), one update at
// a time, in order.
class StreamDelivery::Stream : public std::enable_shared_from_this<Stream> {
 public:
  Stream(StreamDelivery& owner, lmx_stream_callback callback, void* user_data)
      : owner_(owner), callback_(callback), user_data_(user_data) {}

  // Queues `chunks` (JSON text; when `final`, the last one is the final chunk and the list is not
  // empty). Queued, Overflowed (the bound was crossed now: nothing queued, cancel the request),
  // or Dropped (crossed before: only a final chunk is still queued).
  Push push(std::vector<std::string> chunks, bool final) {
    return owner_.push(*this, std::move(chunks), final);
  }
  // Whether the bound was crossed (the final chunk should say so).
  bool over_bound() const;
  int64_t limit() const { return owner_.max_buffer_bytes(); }

 private:
  friend class StreamDelivery;
  StreamDelivery& owner_;
  const lmx_stream_callback callback_;
  void* const user_data_;
  // Guarded by owner_.mu_.
  std::deque<std::string> chunks_;
  int64_t bytes_ = 0;       // of chunks_
  bool scheduled_ = false;  // in ready_ or being served
  bool final_queued_ = false;
  bool over_bound_ = false;
  bool done_ = false;  // final delivered, or abandoned
};

// True while this thread runs a host stream callback.
bool in_stream_callback();

}  // namespace lmx::plugin
