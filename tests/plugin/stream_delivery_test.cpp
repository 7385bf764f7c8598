// plugin/stream_delivery.h without an engine: per-request order, a slow callback holding back
// only its own request, the per-request bound, stop() delivering every final chunk, abandon().
#include "plugin/stream_delivery.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/api/engine.h"

namespace {

using lmx::plugin::StreamDelivery;
using Push = StreamDelivery::Push;
using namespace std::chrono_literals;

// What one stream's callback saw. `gate` closed: the callback blocks on its first chunk.
struct Sink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> chunks;
  int finals = 0;
  int concurrent = 0, max_concurrent = 0;
  bool gate_open = true;
  bool on_delivery_thread = true;

  static void callback(void* user_data, const char* chunk, size_t len, int32_t is_final) {
    auto* s = static_cast<Sink*>(user_data);
    std::unique_lock lock(s->mu);
    s->max_concurrent = std::max(s->max_concurrent, ++s->concurrent);
    s->on_delivery_thread = s->on_delivery_thread && lmx::plugin::in_stream_callback();
    s->cv.wait(lock, [&] { return s->gate_open; });
    s->chunks.emplace_back(chunk, len);
    if (is_final) ++s->finals;
    --s->concurrent;
    s->cv.notify_all();
  }
  void open_gate() {
    std::lock_guard lock(mu);
    gate_open = true;
    cv.notify_all();
  }
  bool wait_final(std::chrono::milliseconds within) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, within, [&] { return finals > 0; });
  }
  bool wait_chunks(size_t n, std::chrono::milliseconds within) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, within, [&] { return chunks.size() >= n; });
  }
};

TEST(StreamDelivery, ChunksOfOneRequestArriveInOrderOneAtATime) {
  StreamDelivery d(1 << 20);
  Sink sink;
  auto s = d.open(&Sink::callback, &sink);
  std::vector<std::string> expected;
  for (int i = 0; i < 500; ++i) {
    expected.push_back(std::to_string(i));
    ASSERT_EQ(s->push({expected.back()}, i == 499), Push::Queued);
  }
  ASSERT_TRUE(sink.wait_final(10s));
  std::lock_guard lock(sink.mu);
  EXPECT_EQ(sink.chunks, expected);
  EXPECT_EQ(sink.finals, 1);
  EXPECT_EQ(sink.max_concurrent, 1);
  EXPECT_TRUE(sink.on_delivery_thread);
  EXPECT_FALSE(lmx::plugin::in_stream_callback());  // this thread never ran a callback
}

TEST(StreamDelivery, ASlowCallbackHoldsBackOnlyItsOwnRequest) {
  StreamDelivery d(1 << 20);
  Sink slow, fast;
  slow.gate_open = false;  // blocks inside its first chunk until opened
  auto a = d.open(&Sink::callback, &slow);
  auto b = d.open(&Sink::callback, &fast);
  a->push({"a0"}, false);
  ASSERT_TRUE([&] {  // the slow callback is now running (and blocked)
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard lock(slow.mu);
        if (slow.concurrent == 1) return true;
      }
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }());
  a->push({"a1"}, true);
  for (int i = 0; i < 10; ++i) b->push({std::string("b").append(std::to_string(i))}, i == 9);
  EXPECT_TRUE(fast.wait_final(5s)) << "the fast request waited for the slow callback";
  EXPECT_EQ(slow.finals, 0);
  slow.open_gate();
  EXPECT_TRUE(slow.wait_final(5s));
  std::lock_guard lock(slow.mu);
  EXPECT_EQ(slow.chunks, (std::vector<std::string>{"a0", "a1"}));
}

TEST(StreamDelivery, PastTheBoundChunksAreDroppedAndTheFinalStillArrives) {
  StreamDelivery d(100);  // bytes of chunk JSON waiting per request
  Sink sink;
  sink.gate_open = false;
  auto s = d.open(&Sink::callback, &sink);
  const std::string chunk(40, 'x');
  EXPECT_EQ(s->push({chunk}, false), Push::Queued);  // taken by the callback, which blocks
  ASSERT_TRUE([&] {
    for (int i = 0; i < 1000 && d.stats()["buffered_bytes"] != 0; ++i)
      std::this_thread::sleep_for(1ms);
    return d.stats()["buffered_bytes"] == 0;
  }());
  EXPECT_EQ(s->push({chunk}, false), Push::Queued);  // 40 waiting
  EXPECT_EQ(s->push({chunk}, false), Push::Queued);  // 80 waiting
  EXPECT_FALSE(s->over_bound());
  EXPECT_EQ(s->push({chunk}, false), Push::Overflowed);  // 120 > 100: the caller cancels
  EXPECT_TRUE(s->over_bound());
  EXPECT_EQ(s->push({chunk}, false), Push::Dropped);
  EXPECT_EQ(s->push({"t", "final"}, true), Push::Dropped);  // only the final chunk is queued
  EXPECT_EQ(d.stats()["slow_consumers_cancelled"], 1);
  EXPECT_EQ(d.stats()["buffered_bytes"], 80 + 5);
  sink.open_gate();
  ASSERT_TRUE(sink.wait_final(5s));
  std::lock_guard lock(sink.mu);
  EXPECT_EQ(sink.chunks, (std::vector<std::string>{chunk, chunk, chunk, "final"}));
}

TEST(StreamDelivery, OneChunkIsAlwaysAcceptedIntoAnEmptyQueue) {
  StreamDelivery d(1);
  Sink sink;
  auto s = d.open(&Sink::callback, &sink);
  EXPECT_EQ(s->push({std::string(1000, 'x')}, false), Push::Queued);
  EXPECT_TRUE(sink.wait_chunks(1, 5s));
  s->push({"end"}, true);
  EXPECT_TRUE(sink.wait_final(5s));
}

TEST(StreamDelivery, StopDeliversEveryFinalChunkThenRefusesNewStreams) {
  StreamDelivery d(1 << 20);
  std::vector<std::unique_ptr<Sink>> sinks;
  for (int i = 0; i < 32; ++i) {
    sinks.push_back(std::make_unique<Sink>());
    auto s = d.open(&Sink::callback, sinks.back().get());
    s->push({"a", "b"}, false);
    s->push({"final"}, true);
  }
  d.stop();
  for (const auto& s : sinks) {
    std::lock_guard lock(s->mu);
    EXPECT_EQ(s->finals, 1);
    EXPECT_EQ(s->chunks.size(), 3u);
  }
  EXPECT_EQ(d.stats()["open_streams"], 0);
  EXPECT_EQ(d.stats()["delivery_threads"], 0);
  EXPECT_THROW(d.open(&Sink::callback, sinks[0].get()), lmx::EngineUnavailableError);
}

TEST(StreamDelivery, AnAbandonedStreamDoesNotHoldUpStop) {
  StreamDelivery d(1 << 20);
  Sink sink;
  auto s = d.open(&Sink::callback, &sink);
  d.abandon(*s);
  d.stop();  // returns: nothing was owed to the abandoned stream
  EXPECT_TRUE(sink.chunks.empty());
}

TEST(StreamDelivery, ManyBlockedCallbacksDoNotBlockAnother) {
  StreamDelivery d(1 << 20);
  std::vector<std::unique_ptr<Sink>> blocked;
  std::vector<std::shared_ptr<StreamDelivery::Stream>> streams;
  for (int i = 0; i < 20; ++i) {
    blocked.push_back(std::make_unique<Sink>());
    blocked.back()->gate_open = false;
    streams.push_back(d.open(&Sink::callback, blocked.back().get()));
    streams.back()->push({"x"}, true);
  }
  Sink fast;
  auto f = d.open(&Sink::callback, &fast);
  f->push({"y"}, true);
  EXPECT_TRUE(fast.wait_final(5s));
  EXPECT_GE(d.stats()["delivery_threads"], 21);
  for (auto& b : blocked) b->open_gate();
  d.stop();
  for (auto& b : blocked) EXPECT_EQ(b->finals, 1);
}

}  // namespace
