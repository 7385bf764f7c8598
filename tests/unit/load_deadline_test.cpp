// option.model_loading_timeout: a load that runs past it fails at the deadline, naming the
// setting, and the abandoned load stops (engine/core/load_deadline.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine/api/engine.h"
#include "engine/core/load_deadline.h"
#include "engine/parallel/rank_group.h"
#include "properties/serving_config.h"

namespace lmx {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const fs::path kModel = fs::path(LMX_SHARED_MODELS_DIR) / "tinystories-656k";

std::shared_ptr<LoadDeadline> deadline_in(std::chrono::milliseconds ms) {
  return std::make_shared<LoadDeadline>(Clock::now() + ms, "test load past its deadline");
}

// Waits until `done` holds, at most `limit`.
template <typename Pred>
bool eventually(Pred done, std::chrono::milliseconds limit = 5000ms) {
  const auto until = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// tinystories-656k whose model.safetensors is a named pipe: opening it blocks until a writer
// comes, as a read from a hung network file system does. release() lets the blocked open return
// (the loader then refuses the pipe as not a regular file).
class HungCheckpoint {
 public:
  HungCheckpoint() {
    dir_ = fs::temp_directory_path() /
           ("lmx_hung_load_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const auto& entry : fs::directory_iterator(kModel))
      if (entry.path().filename() != "model.safetensors")
        fs::copy_file(entry.path(), dir_ / entry.path().filename());
    if (::mkfifo((dir_ / "model.safetensors").c_str(), 0600) != 0)
      throw std::runtime_error("mkfifo failed");
    std::ofstream(dir_ / "serving.properties") << "option.model_loading_timeout=1\n";
  }
  ~HungCheckpoint() {
    release();
    fs::remove_all(dir_);
  }
  const fs::path& dir() const { return dir_; }

  // Opens and closes the pipe's writing end once a reader waits in open() (for up to 5 s).
  void release() {
    const auto until = Clock::now() + 5s;
    while (Clock::now() < until) {
      int fd = ::open((dir_ / "model.safetensors").c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) {
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(10ms);  // ENXIO: no reader (yet, or any more)
    }
  }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

TEST(ModelLoadingTimeout, HungLoadFailsAtTheDeadlineNamingTheSetting) {
  HungCheckpoint model;
  const properties::ServingConfig config = properties::load_serving_config(
      model.dir(), properties::Environment::from_map({}, 0),
      properties::EngineCapabilities::this_build());
  ASSERT_EQ(config.model_loading_timeout_s, 1);
  const auto started = Clock::now();
  auto result = std::async(std::launch::async, [&config]() -> std::string {
    try {
      Engine::create(config);
      return "loaded";
    } catch (const LoadTimeoutError& e) {
      return std::string("timeout: ") + e.what();
    } catch (const std::exception& e) {
      return std::string("other error: ") + e.what();
    }
  });
  const bool returned = result.wait_for(10s) == std::future_status::ready;
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  model.release();  // either way: let the blocked open() return
  ASSERT_TRUE(returned) << "Engine::create was still loading 10 s after a 1 s timeout";
  const std::string what = result.get();
  EXPECT_EQ(what.rfind("timeout: ", 0), 0u) << what;
  EXPECT_NE(what.find("option.model_loading_timeout=1 s (from line 1 of "), std::string::npos)
      << what;
  EXPECT_NE(what.find("serving.properties"), std::string::npos) << what;
  EXPECT_GE(seconds, 0.9);
  EXPECT_LT(seconds, 5.0);
}

TEST(ModelLoadingTimeout, AbandonedLoadStopsAtItsNextCheck) {
  std::atomic<bool> stopped{false};
  std::atomic<long> checks{0};
  const auto started = Clock::now();
  try {
    run_with_load_deadline<int>(deadline_in(100ms), [&stopped, &checks]() -> std::unique_ptr<int> {
      try {
        for (auto until = Clock::now() + 10s; Clock::now() < until; ++checks) {
          check_load_deadline();
          std::this_thread::sleep_for(1ms);
        }
      } catch (const LoadTimeoutError&) {
        stopped = true;
        throw;
      }
      return std::make_unique<int>(1);
    });
    ADD_FAILURE() << "a load past its deadline returned";
  } catch (const LoadTimeoutError& e) {
    EXPECT_STREQ(e.what(), "test load past its deadline");
  }
  EXPECT_LT(Clock::now() - started, 1s);
  EXPECT_TRUE(eventually([&] { return stopped.load(); }));
  EXPECT_GT(checks.load(), 0);
}

// A load that cannot be interrupted and ends after the deadline: the caller has its error at the
// deadline, and what the load made is destroyed (nobody takes it).
TEST(ModelLoadingTimeout, ResultOfALateLoadIsDestroyed) {
  struct Engineish {
    explicit Engineish(std::atomic<bool>* d) : destroyed(d) {}
    ~Engineish() { *destroyed = true; }
    std::atomic<bool>* destroyed;
  };
  std::atomic<bool> destroyed{false};
  const auto started = Clock::now();
  EXPECT_THROW(run_with_load_deadline<Engineish>(deadline_in(50ms),
                                                 [&destroyed] {
                                                   std::this_thread::sleep_for(300ms);
                                                   return std::make_unique<Engineish>(&destroyed);
                                                 }),
               LoadTimeoutError);
  EXPECT_LT(Clock::now() - started, 250ms);
  EXPECT_TRUE(eventually([&] { return destroyed.load(); }));
}

TEST(ModelLoadingTimeout, LoadWithinTheDeadlineReturnsItsResultOrError) {
  auto value = run_with_load_deadline<int>(deadline_in(5000ms), [] {
    check_load_deadline();
    return std::make_unique<int>(7);
  });
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(*value, 7);
  EXPECT_THROW(run_with_load_deadline<int>(deadline_in(5000ms),
                                           []() -> std::unique_ptr<int> {
                                             throw Error("bad checkpoint");
                                           }),
               Error);
  check_load_deadline();  // this thread has no load deadline: nothing to check
}

// Tensor-parallel ranks are threads the load starts: each takes the load's deadline, so an
// abandoned group stops on every rank (a rank without it would keep the group waiting forever).
TEST(ModelLoadingTimeout, TensorParallelRanksTakeTheLoadDeadline) {
  std::atomic<int> ranks_stopped{0};
  EXPECT_THROW(run_with_load_deadline<Backend>(
                   deadline_in(100ms),
                   [&ranks_stopped] {
                     return make_thread_group(3, [&ranks_stopped](Communicator&)
                                                     -> std::unique_ptr<Backend> {
                       try {
                         for (auto until = Clock::now() + 10s; Clock::now() < until;) {
                           check_load_deadline();
                           std::this_thread::sleep_for(1ms);
                         }
                       } catch (const LoadTimeoutError&) {
                         ++ranks_stopped;
                         throw;
                       }
                       return nullptr;
                     });
                   }),
               LoadTimeoutError);
  EXPECT_TRUE(eventually([&] { return ranks_stopped.load() == 3; }, 3000ms))
      << ranks_stopped.load() << " of 3 ranks stopped";
}

}  // namespace
}  // namespace lmx
