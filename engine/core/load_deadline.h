// option.model_loading_timeout (LMI): a model whose load takes longer than the timeout fails to
// load. Engine::create runs the load through run_with_load_deadline():
//
//   - the load runs on a thread of its own; the caller waits for it until the deadline and then
//     gets LoadTimeoutError (naming the key and the value) at once, whatever the load is doing;
//   - the load is abandoned: check_load_deadline(), which loading code calls between units of
//     work (each tensor as it is materialized, each step of building an engine), throws on the
//     loading thread from then on, so the load unwinds and frees what it holds. Threads a load
//     starts (replicas, tensor-parallel ranks) take their starter's deadline with
//     LoadDeadlineScope. A result ready after the deadline is destroyed on the loading thread;
//   - a load blocked in a call that never returns (a hung file system or device) keeps its thread
//     until the process exits. The library holding the loading code then stays mapped
//     (RTLD_NODELETE), so a host that unloads the plugin after the error does not pull the code
//     from under that thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "engine/core/error.h"

namespace lmx {

class LoadTimeoutError : public Error {
 public:
  using Error::Error;
};

class LoadDeadline {
 public:
  using Clock = std::chrono::steady_clock;
  // `message` is what LoadTimeoutError says (it names the setting and its value).
  LoadDeadline(Clock::time_point at, std::string message)
      : at_(at), message_(std::move(message)) {}

  Clock::time_point at() const { return at_; }
  // Past the time, or given up by the caller.
  bool expired() const {
    return abandoned_.load(std::memory_order_acquire) || Clock::now() >= at_;
  }
  void abandon() { abandoned_.store(true, std::memory_order_release); }
  bool abandoned() const { return abandoned_.load(std::memory_order_acquire); }
  [[noreturn]] void fail() const { throw LoadTimeoutError(message_); }

 private:
  Clock::time_point at_;
  std::string message_;
  std::atomic<bool> abandoned_{false};
};

// The deadline of the load running on this thread (null when none).
std::shared_ptr<LoadDeadline> current_load_deadline();

// Makes `deadline` this thread's for the scope (restoring the previous one after).
class LoadDeadlineScope {
 public:
  explicit LoadDeadlineScope(std::shared_ptr<LoadDeadline> deadline);
  ~LoadDeadlineScope();
  LoadDeadlineScope(const LoadDeadlineScope&) = delete;
  LoadDeadlineScope& operator=(const LoadDeadlineScope&) = delete;

 private:
  std::shared_ptr<LoadDeadline> previous_;
};

// Throws LoadTimeoutError when this thread's load is past its deadline or abandoned; does nothing
// on a thread without a load deadline. Cheap: call it between units of loading work.
void check_load_deadline();

namespace detail {
// Marks the shared object that holds this code as never to be unloaded (an abandoned load's
// thread may still run in it).
void keep_loaded_for_abandoned_load();
}  // namespace detail

// Runs `load` (returning std::unique_ptr<T>) on a thread of its own under `deadline` and returns
// its result or rethrows its exception; past the deadline throws LoadTimeoutError and abandons the
// load (see above). `load` must own everything it uses: it may outlive this call.
template <typename T, typename Load>
std::unique_ptr<T> run_with_load_deadline(const std::shared_ptr<LoadDeadline>& deadline,
                                          Load load) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool abandoned = false;
    std::unique_ptr<T> result;
    std::exception_ptr error;
  };
  auto state = std::make_shared<State>();
  std::thread([state, deadline, load = std::move(load)]() mutable {
    std::unique_ptr<T> result;
    std::exception_ptr error;
    {
      LoadDeadlineScope scope(deadline);
      try {
        result = load();
      } catch (...) {
        error = std::current_exception();
      }
    }
    std::unique_lock lock(state->mu);
    if (state->abandoned) {
      lock.unlock();
      result.reset();  // finished after the deadline: nobody takes it
      return;
    }
    state->result = std::move(result);
    state->error = error;
    state->done = true;
    state->cv.notify_all();
  }).detach();
  std::unique_lock lock(state->mu);
  if (!state->cv.wait_until(lock, deadline->at(), [&] { return state->done; })) {
    state->abandoned = true;
    deadline->abandon();
    lock.unlock();
    detail::keep_loaded_for_abandoned_load();
    deadline->fail();
  }
  if (state->error) std::rethrow_exception(state->error);
  return std::move(state->result);
}

}  // namespace lmx
